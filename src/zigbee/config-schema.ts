// The Zigbee family's config block (DESIGN B2, `zigbee`): devices behind a zigbee2mqtt
// bridge and the bridge's broker. Device types are the wire codes device sync publishes:
// 30 a switch or plug, 31 a thermostat. config/schema.ts composes this block into the
// file's schema; this module imports only zod and src/util, so nothing here reaches config/.
import { z } from "zod";
import { brokerUrl } from "../util/broker-url.js";
import { deviceId, deviceName, ratedPower, shedPriority } from "../util/device-fields.js";

/** Levels zigbee2mqtt's topics use after a device's name: a name with one of them would alias another device's topics. */
const RESERVED_LEVELS = new Set(["set", "get", "availability"]);

/** Why a string may not be topic levels (undefined: it may): no wildcard, NUL or control character, no empty level. */
function topicLevelsProblem(name: string, max: number): string | undefined {
  if (name.length === 0) return "is empty";
  if (name.length > max) return `is longer than ${max} characters`;
  // A lone surrogate would reach the wire as U+FFFD: another name than the one checked.
  if (Buffer.from(name, "utf8").toString("utf8") !== name) return "is not valid Unicode";
  if (/[+#]/.test(name)) return "contains an MQTT wildcard (+ #)";
  // oxlint-disable-next-line no-control-regex -- control characters are what this rejects
  if (/[\u0000-\u001f\u007f-\u009f]/.test(name)) return "contains NUL or a control character";
  if (name.split("/").some((l) => l === "")) return "has an empty topic level (a leading, trailing or double /)";
  return undefined;
}

/**
 * Why a Zigbee friendly name may not be put into a topic (undefined: it may). The same
 * rule holds for a name in the config and a name the bridge's device list reports: no
 * wildcard, NUL or control character, no empty level, not below `bridge/` (the bridge's
 * own request topics) and no level that zigbee2mqtt reads as a command or availability.
 */
export function zigbeeNameProblem(name: string): string | undefined {
  const problem = topicLevelsProblem(name, 256);
  if (problem) return problem;
  const levels = name.split("/");
  if (levels[0] === "bridge") return "is below bridge/, the bridge's own topics";
  const reserved = levels.find((l) => RESERVED_LEVELS.has(l));
  if (reserved) return `has a topic level "${reserved}", which zigbee2mqtt reads as a command or availability topic`;
  return undefined;
}

const topicName = (what: string) =>
  z.string().superRefine((n, ctx) => {
    const problem = zigbeeNameProblem(n);
    if (problem) ctx.addIssue({ code: "custom", message: `${what} ${problem}` });
  });

const zigbeeDevice = z
  .strictObject({
    device_id: deviceId,
    device_name: deviceName,
    friendly_name: topicName("friendly_name").optional().describe("The device's zigbee2mqtt friendly name (or ieee_address)"),
    ieee_address: z
      .string()
      .regex(/^0x[0-9a-f]{16}$/i, "must be 0x and 16 hex digits")
      .transform((s) => s.toLowerCase())
      .optional()
      .describe("The device's IEEE address, 0x and 16 hex digits (or friendly_name)"),
    device_type: z
      .union([z.literal(30), z.literal(31)], { error: "must be 30 (switch or plug) or 31 (thermostat)" })
      .describe("30: a switch or plug, 31: a thermostat"),
    rated_power_w: ratedPower.optional(),
    shed_priority: shedPriority.optional(),
    setback_c: z
      .number()
      .positive("must be > 0")
      .max(15, "must be at most 15")
      .optional()
      .describe("Thermostat (31) only: how far a shed lowers the heating setpoint (°C); default 2"),
  })
  .superRefine((d, ctx) => {
    if ((d.friendly_name === undefined) === (d.ieee_address === undefined))
      ctx.addIssue({ code: "custom", path: ["friendly_name"], message: "give exactly one of friendly_name and ieee_address" });
    if (d.setback_c !== undefined && d.device_type !== 31)
      ctx.addIssue({ code: "custom", path: ["setback_c"], message: "only a thermostat (device_type 31) takes setback_c" });
  })
  .transform((d) => ({ ...d, setback_c: d.device_type === 31 ? (d.setback_c ?? 2) : undefined }));

export const zigbeeSchema = z
  .strictObject({
    url: brokerUrl.describe("The bridge's broker, usually the local mosquitto: mqtts:// anywhere, mqtt:// only to a loopback host"),
    ca_file: z.string().min(1).optional().describe("CA certificates (PEM) trusted for an mqtts:// broker, besides the system's"),
    base_topic: z
      .string()
      .superRefine((t, ctx) => {
        const problem = topicLevelsProblem(t, 128);
        if (problem) ctx.addIssue({ code: "custom", message: `base_topic ${problem}` });
      })
      .default("zigbee2mqtt")
      .describe("zigbee2mqtt's base_topic"),
    username: z.string().min(1).optional().describe("Broker user name (with password)"),
    password: z.string().optional().describe("Broker password"),
    command_timeout_ms: z
      .number()
      .int()
      .min(500)
      .max(60_000)
      .default(5000)
      .describe("How long a command waits for the state message that confirms it (ms); none in time: a failed write"),
    devices: z.array(zigbeeDevice).max(256).default([]).describe("The bridge's devices the gateway uses"),
  })
  .superRefine((z_, ctx) => {
    if (z_.password !== undefined && z_.username === undefined)
      ctx.addIssue({ code: "custom", path: ["username"], message: "required with password" });
    if (z_.ca_file !== undefined && !z_.url.startsWith("mqtts:"))
      ctx.addIssue({ code: "custom", path: ["ca_file"], message: "only an mqtts:// url uses ca_file" });
    const seen = new Map<string, number>();
    z_.devices.forEach((d, i) => {
      const key = d.friendly_name ?? d.ieee_address!;
      const j = seen.get(key);
      if (j !== undefined)
        ctx.addIssue({
          code: "custom",
          path: ["devices", i, d.friendly_name ? "friendly_name" : "ieee_address"],
          message: `names the same Zigbee device as devices[${j}]`,
        });
      seen.set(key, i);
    });
  });

export type ZigbeeConfig = z.infer<typeof zigbeeSchema>;
export type ZigbeeDeviceConfig = ZigbeeConfig["devices"][number];

/** The device ids the `zigbee` block declares, by config path (for the one device_id check, device-ids.ts). */
export function zigbeeDeclaredIds(cfg: { zigbee?: { devices: ReadonlyArray<{ device_id: string }> } | undefined }) {
  return (cfg.zigbee?.devices ?? []).map((d, i) => ({ device_id: d.device_id, family: "zigbee", where: `zigbee.devices[${i}]` }));
}
