// The scenario file of a simulated site (DESIGN B7): ports, the devices on each, the site
// model's knobs, the control API address, the seed. YAML (JSON is YAML), zod-validated.
import { readFileSync } from "node:fs";
import { parse } from "yaml";
import { z } from "zod";
import { issuesToDetails } from "../src/util/zod-issues.js";
import { BRANDS, brandRow } from "./models/brands/index.js";
import { common } from "./models/brands/keys.js";
import { siteSchema } from "./site-schema.js";

export { BRAND_MODELS } from "./models/brands/index.js";

const listen = z.string().regex(/^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):\d{1,5}$/, 'must be "host:port"');

/**
 * The scale factor of a SunSpec device's control points (InOutWRte_SF, WMaxLimPct_SF):
 * real inverters publish -2 or -1 as often as 0, and obey the raw value scaled by it.
 */
const controlSf = z.union([z.literal(-2), z.literal(-1), z.literal(0), z.literal(1)], { error: "must be -2, -1, 0 or 1" }).default(0);

export const deviceSchema = z.discriminatedUnion("model", [
  z.strictObject({
    ...common,
    model: z.literal("sunspec-storage"),
    max_power_w: z.number().positive().default(5000),
    capacity_wh: z.number().positive().default(10000),
    soc_pct: z.number().min(0).max(100).default(50),
    serial: z.string().optional(),
    control_sf: controlSf,
    /** Models left out of the chain (a storage device that lists no inverter model: [103]); never the common model 1. */
    omit_models: z.array(z.union([z.literal(103), z.literal(120), z.literal(123), z.literal(124)])).default([]),
  }),
  z.strictObject({
    ...common,
    model: z.literal("sunspec-pv"),
    max_power_w: z.number().positive().default(6000),
    serial: z.string().optional(),
    control_sf: controlSf,
  }),
  z.strictObject({ ...common, model: z.literal("sunspec-meter"), serial: z.string().optional() }),
  /** A device no profile describes: any register answers a seeded word, writes answer exception 2. */
  z.strictObject({ ...common, model: z.literal("unknown") }),
  /** Only the common model 1: a SunSpec device that does not tell what it is. */
  z.strictObject({ ...common, model: z.literal("sunspec-common"), serial: z.string().optional() }),
  z.strictObject({ ...common, model: z.literal("sdm630"), serial: z.number().int().min(0).max(0xffffffff).optional() }),
  z.strictObject({
    ...common,
    model: z.literal("relay"),
    coils: z.number().int().min(1).max(64).default(4),
    load_per_coil_w: z.number().min(0).default(500),
  }),
  ...BRANDS.map((r) => r.schema),
]);

function isBrand(model: string): boolean {
  return BRANDS.some((r) => r.model === model);
}

/**
 * A zigbee2mqtt friendly name: the topic segment(s) of the device. MQTT wildcards and the
 * segments zigbee2mqtt gives a meaning (set, get, availability) cannot be part of one.
 */
const friendlyName = z
  .string()
  .regex(/^[A-Za-z0-9_.-]+(\/[A-Za-z0-9_.-]+)*$/, "must be letters, digits, _ . - and / between segments")
  .refine(
    (n) => !n.split("/").some((seg) => ["set", "get", "availability", "bridge"].includes(seg)),
    "must not contain the segments set, get, availability or bridge",
  )
  .refine((n) => !/\/\d+$/.test(n), "must not end with /<number> (zigbee2mqtt reads that as an endpoint)");

const zigbeeDevice = z.strictObject({
  friendly_name: friendlyName,
  /** 64-bit IEEE address as zigbee2mqtt writes it; absent = derived from the seed and name. */
  ieee_address: z
    .string()
    .regex(/^0x[0-9a-f]{16}$/, 'must be "0x" and 16 lowercase hex digits')
    .optional(),
  kind: z.enum(["plug", "thermostat"], { error: 'must be "plug" or "thermostat"' }),
  /** The device reports power (W) and energy (kWh). */
  metering: z.boolean().default(true),
  /** Plug: the appliance's power while ON. Thermostat: the heater's power while heating. */
  load_w: z.number().min(0).max(20000).default(1000),
  /** Seeded variation of the metered load, percent. */
  load_noise_pct: z.number().min(0).max(20).default(1),
  /** Plug: switched on at start. */
  on: z.boolean().default(true),
  /** Thermostat: occupied_heating_setpoint at start, degC. */
  setpoint_c: z.number().min(5).max(30).default(21),
  /** Thermostat: the room's temperature at start (default: the setpoint). */
  room_c: z.number().min(-10).max(40).optional(),
  /** Thermostat: the temperature the room falls toward without heating. */
  ambient_c: z.number().min(-20).max(30).default(12),
  /** Starting value of the energy counter, kWh. */
  energy_kwh: z.number().min(0).default(0),
  /** Periodic state report, seconds (a real device's attribute reporting max interval). */
  report_interval_s: z.number().min(1).max(3600).optional(),
});

const zigbeeBlock = z.strictObject({
  broker: z.string().regex(/^mqtts?:\/\/[^\s/]+(:\d{1,5})?\/?$/, 'must be "mqtt://host:port" or "mqtts://host:port"'),
  username: z.string().min(1).optional(),
  password: z.string().optional(),
  /** CA certificate file for mqtts:// (resolved against the base dir). */
  ca_file: z.string().min(1).optional(),
  base_topic: z
    .string()
    .regex(/^[A-Za-z0-9_.-]+(\/[A-Za-z0-9_.-]+)*$/, "must be letters, digits, _ . - and / between segments")
    .default("zigbee2mqtt"),
  /** Default periodic state report interval, seconds. */
  report_interval_s: z.number().min(1).max(3600).default(10),
  devices: z.array(zigbeeDevice).min(1),
});

const gpioLine = z
  .strictObject({
    line: z.number().int().min(0).max(1023),
    direction: z.enum(["input", "output"], { error: 'must be "input" or "output"' }),
    /** Level at start, 0 or 1. */
    value: z.union([z.literal(0), z.literal(1)], { error: "must be 0 or 1" }).default(0),
    /** Output only: the load the line switches, counted in the site balance while the level is 1. */
    load_w: z.number().min(0).max(50000).optional(),
    /** A label for logs and /state. */
    name: z
      .string()
      .regex(/^[A-Za-z0-9_-]+$/)
      .optional(),
  })
  .refine((l) => l.direction === "output" || l.load_w === undefined, {
    message: "load_w only applies to an output line",
    path: ["load_w"],
  });

const gpioBlock = z.strictObject({ lines: z.array(gpioLine).min(1) });

const tcpPort = z.strictObject({ kind: z.literal("tcp"), listen, devices: z.array(deviceSchema).min(1) });
/** RTU frames over TCP, as behind a serial-to-Ethernet converter (no line timing). */
const rtuTcpPort = z.strictObject({ kind: z.literal("rtu-tcp"), listen, devices: z.array(deviceSchema).min(1) });
const rtuPort = z.strictObject({
  kind: z.literal("rtu"),
  path: z.string().min(1),
  peer: z.string().min(1),
  baud: z.number().int().min(300).max(921600).default(9600),
  /** Line framing, the same keys as the gateway's rtu_ports: 8 data bits, this parity and stop bits. */
  parity: z.enum(["none", "even", "odd"]).default("none"),
  stop_bits: z.union([z.literal(1), z.literal(2)], { error: "must be 1 or 2" }).default(1),
  /** Emulate the wire's speed (character time, 3.5-char silence); off = as fast as the pty. */
  line_timing: z.boolean().default(true),
  /** Time a device takes to start answering after the request's silence. */
  turnaround_ms: z.number().min(0).max(1000).default(5),
  devices: z.array(deviceSchema).min(1),
});

export const scenarioSchema = z.strictObject({
  seed: z.number().int().default(1),
  control: z.strictObject({ listen: listen.default("127.0.0.1:15080") }).default({ listen: "127.0.0.1:15080" }),
  site: siteSchema,
  ports: z.array(z.discriminatedUnion("kind", [tcpPort, rtuTcpPort, rtuPort])).min(1),
  /** The simulator acts as a zigbee2mqtt bridge on this broker (DESIGN B7). */
  zigbee: zigbeeBlock.optional(),
  /** A simulated GPIO chip, read and driven over the control API. */
  gpio: gpioBlock.optional(),
});

export type ScenarioInput = z.input<typeof scenarioSchema>;
export type Scenario = z.output<typeof scenarioSchema>;
export type DeviceSpec = z.output<typeof deviceSchema>;
export type BrandSpec = z.output<(typeof BRANDS)[number]["schema"]>;
export type RtuPortSpec = z.output<typeof rtuPort>;
export type ZigbeeSpec = z.output<typeof zigbeeBlock>;
export type ZigbeeDeviceSpec = z.output<typeof zigbeeDevice>;
export type GpioLineSpec = z.output<typeof gpioLine>;

export function parseScenario(raw: unknown): Scenario {
  const r = scenarioSchema.safeParse(raw);
  if (!r.success) {
    const lines = issuesToDetails(r.error.issues).map((d) => `  ${d.path || "(root)"}: ${d.message}`);
    throw new Error(`scenario is invalid:\n${lines.join("\n")}`);
  }
  const names = new Set<string>();
  for (const p of r.data.ports) {
    const units = new Set<number>();
    for (const d of p.devices) {
      if (names.has(d.name)) throw new Error(`scenario is invalid: device name "${d.name}" is used twice`);
      const own = isBrand(d.model) ? (brandRow(d.model).units?.(d as never) ?? [d.unit]) : [d.unit];
      for (const u of own) {
        if (units.has(u)) throw new Error(`scenario is invalid: unit ${u} is used twice on one port`);
        units.add(u);
      }
      names.add(d.name);
    }
  }
  const ieee = new Set<string>();
  for (const [i, d] of (r.data.zigbee?.devices ?? []).entries()) {
    const where = `zigbee.devices[${i}]`;
    if (names.has(d.friendly_name))
      throw new Error(`scenario is invalid: ${where}.friendly_name: "${d.friendly_name}" is already the name of another device`);
    names.add(d.friendly_name);
    if (d.ieee_address !== undefined) {
      if (ieee.has(d.ieee_address)) throw new Error(`scenario is invalid: ${where}.ieee_address: ${d.ieee_address} is used twice`);
      ieee.add(d.ieee_address);
    }
    if (d.kind === "plug" && d.room_c !== undefined) throw new Error(`scenario is invalid: ${where}.room_c: only a thermostat has a room`);
  }
  const lines = new Set<number>();
  for (const [i, l] of (r.data.gpio?.lines ?? []).entries()) {
    if (lines.has(l.line)) throw new Error(`scenario is invalid: gpio.lines[${i}].line: line ${l.line} is declared twice`);
    lines.add(l.line);
  }
  return r.data;
}

/** Bits per character on an RTU port's wire: start, 8 data, parity if any, stop bits (11 at 8E1). */
export function rtuBitsPerChar(p: Pick<RtuPortSpec, "parity" | "stop_bits">): number {
  return 1 + 8 + (p.parity === "none" ? 0 : 1) + p.stop_bits;
}

export function loadScenario(file: string): Scenario {
  return parseScenario(parse(readFileSync(file, "utf8")));
}
