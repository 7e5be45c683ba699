// The config blocks of devices that are not on a Modbus bus (DESIGN B2): Zigbee devices
// behind a zigbee2mqtt bridge (`zigbee`) and GPIO lines (`gpio`). Device types are the
// wire codes device sync publishes: 30 Zigbee switch or plug, 31 thermostat, 40 GPIO
// input, 41 GPIO output.
import { z } from "zod";
import { brokerUrl } from "./broker-url.js";

const deviceId = z.string().min(1).max(128).describe("The device's id; one namespace with devices, zigbee and gpio");
const deviceName = z.string().max(128).optional().describe("A name shown in device sync and on the status page");
const ratedPower = z
  .number()
  .positive("must be > 0")
  .max(1e7, "is too large")
  .describe("The load the device switches (W): what a shed removes when it switches the device off");
const shedPriority = z
  .number()
  .int("must be an integer 0..1000")
  .min(0, "must be 0..1000")
  .max(1000, "must be 0..1000")
  .describe("Shed order among loads: lower first, then device_id; default 100");

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

const onActive = z.strictObject({
  event_type: z.literal("pv_limit", { error: 'must be "pv_limit"' }).describe("The local event run while the input is active"),
  limit_pct: z.number().min(0, "must be 0..100").max(100, "must be 0..100").describe("PV output limit, % of rated power"),
  priority: z.number().int().min(0).optional().describe("The event's priority; default 0"),
});
const line = z.number().int().min(0).max(1023).describe("The line's offset on the chip");
const activeLow = z.boolean().default(false).describe("The line is active at level 0");

const gpioOutput = z.strictObject({
  device_id: deviceId,
  device_name: deviceName,
  line,
  device_type: z.literal(41).describe("41: an output (a switched load), 40: an input"),
  active_low: activeLow,
  rated_power_w: ratedPower.optional(),
  shed_priority: shedPriority.optional(),
});

const gpioInput = z.strictObject({
  device_id: deviceId,
  device_name: deviceName,
  line,
  device_type: z.literal(40).describe("41: an output (a switched load), 40: an input"),
  active_low: activeLow,
  debounce_ms: z.number().int().min(0).max(10_000).default(20).describe("Input: a level must hold this long to count (ms)"),
  on_active: onActive.optional().describe("Input: a local event that runs while the input is active (a ripple-control receiver)"),
});

export const gpioSchema = z
  .strictObject({
    backend: z
      .enum(["chardev", "sim"], { error: 'must be "chardev" (the Linux GPIO character device) or "sim" (the simulator)' })
      .describe("chardev: the Linux GPIO character device (Debian's gpiod tools); sim: the simulator's chip (tests)"),
    chip: z
      .string()
      .min(1)
      .describe("chardev: a chip name (gpiochip0), path (/dev/gpiochip0) or label (pinctrl-bcm2711); sim: the simulator's control URL"),
    lines: z
      .array(z.discriminatedUnion("device_type", [gpioOutput, gpioInput], { error: "device_type must be 41 (output) or 40 (input)" }))
      .max(64)
      .default([])
      .describe("The lines the gateway uses"),
  })
  .superRefine((g, ctx) => {
    if (g.backend === "sim" && !/^https?:\/\/[^/]+/.test(g.chip))
      ctx.addIssue({
        code: "custom",
        path: ["chip"],
        message: "with backend sim, must be the simulator's control URL (http://127.0.0.1:PORT)",
      });
    const seen = new Map<number, number>();
    g.lines.forEach((l, i) => {
      const j = seen.get(l.line);
      if (j !== undefined) ctx.addIssue({ code: "custom", path: ["lines", i, "line"], message: `line ${l.line} is already lines[${j}]` });
      seen.set(l.line, i);
    });
  });

export type GpioConfig = z.infer<typeof gpioSchema>;
export type GpioLineConfig = GpioConfig["lines"][number];
export type GpioOutputConfig = z.infer<typeof gpioOutput>;
export type GpioInputConfig = z.infer<typeof gpioInput>;

/** A debounced GPIO input changed: its config entry and whether it is now active (the `input` event's payload). */
export type InputChange = [input: GpioInputConfig, active: boolean];

/** The device ids the `gpio` block declares, by config path (for the one device_id check, device-ids.ts). */
export function gpioDeclaredIds(cfg: { gpio?: { lines: ReadonlyArray<{ device_id: string }> } | undefined }) {
  return (cfg.gpio?.lines ?? []).map((d, i) => ({ device_id: d.device_id, family: "gpio", where: `gpio.lines[${i}]` }));
}

/** An output line (a switched load) rather than an input. */
export function isGpioOutput(l: GpioLineConfig): l is GpioOutputConfig {
  return l.device_type === 41;
}
