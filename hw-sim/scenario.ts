// The scenario file of a simulated site (DESIGN B7): ports, the devices on each, the site
// model's knobs, the control API address, the seed. YAML (JSON is YAML), zod-validated.
import { readFileSync } from "node:fs";
import { parse } from "yaml";
import { z } from "zod";
import { issuesToDetails } from "../src/config/issues.js";

const listen = z.string().regex(/^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):\d{1,5}$/, 'must be "host:port"');
const unit = z.number().int().min(1).max(247);
const common = { unit, name: z.string().regex(/^[A-Za-z0-9_-]+$/), max_read_regs: z.number().int().min(1).max(125).optional() };

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
  }),
  z.strictObject({ ...common, model: z.literal("sunspec-pv"), max_power_w: z.number().positive().default(6000), serial: z.string().optional(), control_sf: controlSf }),
  z.strictObject({ ...common, model: z.literal("sunspec-meter"), serial: z.string().optional() }),
  /** Only the common model 1: a SunSpec device that does not tell what it is. */
  z.strictObject({ ...common, model: z.literal("sunspec-common"), serial: z.string().optional() }),
  z.strictObject({ ...common, model: z.literal("sdm630"), serial: z.number().int().min(0).max(0xffffffff).optional() }),
  z.strictObject({
    ...common,
    model: z.literal("relay"),
    coils: z.number().int().min(1).max(64).default(4),
    load_per_coil_w: z.number().min(0).default(500),
  }),
]);

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
  site: z
    .strictObject({
      base_load_w: z.number().min(0).default(2000),
      /** Random variation of the load, percent (seeded, a function of the simulated second). */
      load_noise_pct: z.number().min(0).max(50).default(2),
      /** 0..1 pins the PV irradiance; absent = a daylight curve from the UTC clock. */
      pv_irradiance: z.number().min(0).max(1).optional(),
      /** Hours added to UTC for the daylight curve. */
      tz_offset_h: z.number().min(-12).max(14).default(0),
      voltage_v: z.number().positive().default(230),
      frequency_hz: z.number().positive().default(50),
    })
    .default({ base_load_w: 2000, load_noise_pct: 2, tz_offset_h: 0, voltage_v: 230, frequency_hz: 50 }),
  ports: z.array(z.discriminatedUnion("kind", [tcpPort, rtuTcpPort, rtuPort])).min(1),
});

export type ScenarioInput = z.input<typeof scenarioSchema>;
export type Scenario = z.output<typeof scenarioSchema>;
export type DeviceSpec = z.output<typeof deviceSchema>;
export type RtuPortSpec = z.output<typeof rtuPort>;

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
      if (units.has(d.unit)) throw new Error(`scenario is invalid: unit ${d.unit} is used twice on one port`);
      names.add(d.name);
      units.add(d.unit);
    }
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
