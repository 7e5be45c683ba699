// The brand table (DESIGN B9): one row per brand device model, each written from its
// manufacturer's register document, the hybrid inverters with their battery and the meters.
// A row is everything the simulator and the tests know of a brand beside its model file:
// its scenario keys, how to build it, where the brands site puts it, how its own registers
// say its battery power and mode, and whether the dispatch world drives it. The model name
// is the name of the built-in profile that drives it (src/profiles/builtin/<model>.yaml).
// A new brand: its profile YAML, its model file, a row here, and its row in docs/devices.md.
import { z } from "zod";
import type { SiteModel } from "../../site-model.js";
import type { SimDevice } from "../device.js";
import { common, connectDelay, hybrid, ratedPower, reads, unit } from "./keys.js";
import { dec, enc } from "./register-map.js";
import { SungrowSh } from "./sungrow-sh.js";
import { HuaweiSun2000 } from "./huawei-sun2000.js";
import { SmaStorage } from "./sma-storage.js";
import { SolarEdgeStorEdge } from "./solaredge-storedge.js";
import { GoodweEt } from "./goodwe-et.js";
import { VictronGx } from "./victron-gx.js";
import { DeyeHybrid } from "./deye-hybrid.js";
import { Sdm120, Sdm72 } from "./eastron.js";
import { Em24 } from "./em24.js";

/** A Modbus read, as a test's client does it. */
export type Read = (unit: number, table: "holding" | "input", address: number, count: number) => Promise<number[]>;

/**
 * How a battery's own registers say its power and mode: the simulator's reading of the
 * manufacturer's document, kept apart from the gateway's profile so that a test compares
 * the two readings.
 */
export interface BatteryRegisters {
  /** The device's battery power from its own registers, W, positive = discharging. */
  powerW(read: Read, unit: number): Promise<number>;
  /** The device's own mode registers say it is in its self-consumption mode. */
  selfConsumption(read: Read, unit: number): Promise<boolean>;
  /** The simulator's name of that own mode (GET /state mode); absent: self-consumption. */
  ownMode?: string;
  /**
   * Raw register writes (function 16) that force a charge and a discharge of 2 kW and put it
   * back in its own mode, by the document: [address, words], or [address, words, unit] on
   * another unit than the one it is paired on.
   */
  commands: Record<"charge" | "discharge" | "release", Write[]>;
}

export type Write = [address: number, words: number[], unit?: number];

/**
 * One device of the brands site (brandsScenario): `bus` rtu on the RS-485 bus, tcp on its
 * own network port; the rest are its scenario keys.
 */
export interface Placement {
  bus: "rtu" | "tcp";
  name: string;
  unit: number;
  /** Its unit when every device of the site shares one TCP port (another device has `unit` there). */
  shared_unit?: number;
  /**
   * false: no built-in profile reads this variant (identification names nothing there); a
   * name: another built-in profile reads it (identification names that one), and the brand
   * tests, which drive the row's own profile, leave it out.
   */
  profile?: false | string;
  [key: string]: unknown;
}

export interface BrandRow<S extends z.ZodObject = z.ZodObject> {
  /** The scenario model, and the built-in profile that drives it. */
  model: string;
  kind: "battery" | "meter";
  /** Its scenario keys (`model` a literal of its name). */
  schema: S;
  /** Its models on the bus: one, or one per unit id for a device with several (a Victron GX). */
  build(spec: z.output<S>, site: SiteModel): SimDevice[];
  /** Every unit id it answers on, when not only `unit`. */
  units?(spec: z.output<S>): number[];
  /** The unit the gateway pairs, when not `unit` (the GX's VE.Bus unit). */
  pairedUnit?(spec: z.output<S>): number;
  /** Battery brands: how its own registers say its power and mode. */
  battery?: BatteryRegisters;
  /** Where the brands site has it, first the one the tests drive. */
  site: Placement[];
  /** The keys a battery of the dispatch world takes beside its power and energy; absent: not in the world. */
  world?: Record<string, unknown>;
}

function row<S extends z.ZodObject>(r: Omit<BrandRow<S>, "model">): BrandRow<S> {
  return { ...r, model: (r.schema.shape as { model: z.ZodLiteral<string> }).model.value };
}

const u32hi = (w: number[]) => dec.u32(w, "hi-lo");
const s32hi = (v: number) => enc.s32(v, "hi-lo");
const six = (base: number, v: number): Write[] => Array.from({ length: 6 }, (_, i) => [base + i, [v]] as Write);

/** The brands site's hybrids on the bus: a 10 kW inverter, a 5 kW battery, 6 kW of PV, covering a seventh of the load. */
const BENCH_HYBRID = { rated_power_w: 10000, max_power_w: 5000, pv_max_w: 6000, self_use_load_pct: 14 };

export const BRANDS = [
  row({
    kind: "battery",
    schema: z.strictObject({
      ...hybrid,
      model: z.literal("sungrow-sh"),
      rated_power_w: ratedPower(10000),
      /** false: a firmware without the battery power limits 33046/33047 (they answer exception 2). */
      power_limits: z.boolean().default(true),
    }),
    build: (s, site) => [new SungrowSh(s, site)],
    battery: {
      powerW: async (read, u) => {
        const [mag] = await read(u, "input", 13021, 1);
        const [flow] = await read(u, "input", 13000, 1);
        return flow! & 2 ? -mag! : mag!;
      },
      selfConsumption: async (read, u) => (await read(u, "holding", 13049, 1))[0] === 0,
      commands: {
        charge: [
          [13049, [2]],
          [13050, [0xaa]],
          [13051, [2000]],
        ],
        discharge: [[13050, [0xbb]]],
        release: [
          [13049, [0]],
          [13050, [0xcc]],
        ],
      },
    },
    site: [{ bus: "rtu", unit: 1, name: "sungrow", ...BENCH_HYBRID, capacity_wh: 9600 }],
    world: {},
  }),
  row({
    kind: "battery",
    schema: z.strictObject({
      ...hybrid,
      model: z.literal("huawei-sun2000"),
      rated_power_w: ratedPower(10000),
      /** Deaf after a connect for 800 ms: within the 1 s huawei-solar-lib's client waits (see the model's header). */
      connect_delay_ms: connectDelay(800),
      /** A power meter is connected; false: 37100 offline and the meter's values NaN (0x7FFFFFFF). */
      meter: z.boolean().default(true),
    }),
    build: (s, site) => [new HuaweiSun2000(s, site)],
    battery: {
      powerW: async (read, u) => -dec.s32(await read(u, "holding", 37765, 2), "hi-lo"),
      selfConsumption: async (read, u) => (await read(u, "holding", 47100, 1))[0] === 0 && (await read(u, "holding", 47086, 1))[0] === 2,
      commands: {
        charge: [
          [47247, s32hi(2000)],
          [47083, [60]],
          [47246, [0]],
          [47100, [1]],
        ],
        discharge: [
          [47249, s32hi(2000)],
          [47100, [2]],
        ],
        release: [[47100, [0]]],
      },
    },
    site: [{ bus: "rtu", unit: 2, name: "huawei", ...BENCH_HYBRID, capacity_wh: 10000 }],
    world: {},
  }),
  row({
    kind: "battery",
    schema: z.strictObject({
      ...hybrid,
      model: z.literal("sma-storage"),
      /** Seconds without a new setpoint before the inverter returns to its own control. */
      revert_s: z.number().min(1).max(3600).default(60),
      /** SMA device type (30053): 9356 SBS3.7, 9358 SBS5.0-10, 9359 SBS6.0-10. */
      device_type: z.number().int().min(0).default(9359),
      /** SMA device class (30051): 8007 battery inverter (Sunny Boy Storage), 8001 Sunny Tripower Smart Energy. */
      device_class: z.union([z.literal(8001), z.literal(8007)]).default(8007),
      /** An SMA Energy Meter is connected; false: the grid values (30865/30867, 30581/30583) read NaN. */
      meter: z.boolean().default(true),
      /** The AC rating (30231), W, where it exceeds the battery's maximum (max_power_w, 40189/40191 on the 8001). */
      rated_power_w: z.number().positive().max(30000).optional(),
    }),
    build: (s, site) => [new SmaStorage(s, site)],
    battery: {
      powerW: async (read, u) => u32hi(await read(u, "holding", 31395, 2)) - u32hi(await read(u, "holding", 31393, 2)),
      // 40149/40151 are write-only (a read is refused): the row drives and checks the battery
      // management path, whose operating mode 40236 reads back.
      selfConsumption: async (read, u) => u32hi(await read(u, "holding", 40236, 2)) === 2424,
      commands: {
        charge: [
          [40793, s32hi(2000)],
          [40236, s32hi(2289)],
        ],
        discharge: [
          [40793, s32hi(0)],
          [40797, s32hi(2000)],
          [40236, s32hi(2290)],
        ],
        release: [
          [40797, s32hi(0)],
          [40236, s32hi(2424)],
        ],
      },
    },
    // On its own network port at unit 3; on the shared port at 30 (the RS-485 bus has a 3).
    site: [{ bus: "tcp", unit: 3, shared_unit: 30, name: "sma", max_power_w: 5000, capacity_wh: 9800, pv_max_w: 0, self_use_load_pct: 15 }],
    world: {},
  }),
  row({
    kind: "battery",
    schema: z.strictObject({
      ...hybrid,
      model: z.literal("solaredge-storedge"),
      rated_power_w: ratedPower(10000),
      /** Where its SolarEdge meter is: default (model 203 at 40188), none, or shifted +50/+70 (Synergy). */
      meter: z.enum(["default", "none", "shift50", "shift70"]).default("default"),
    }),
    build: (s, site) => [new SolarEdgeStorEdge(s, site)],
    battery: {
      powerW: async (read, u) => -dec.f32(await read(u, "holding", 0xe174, 2), "lo-hi"),
      selfConsumption: async (read, u) => {
        const [ctl] = await read(u, "holding", 0xe004, 1);
        const [cmd] = await read(u, "holding", 0xe00d, 1);
        return ctl === 1 || (ctl === 4 && cmd === 7);
      },
      commands: {
        charge: [
          [0xe004, [4]],
          [0xe005, [1]],
          [0xe00b, enc.u32(600, "lo-hi")],
          [0xe00e, enc.f32(2000, "lo-hi")],
          [0xe00d, [3]],
        ],
        discharge: [
          [0xe010, enc.f32(2000, "lo-hi")],
          [0xe00d, [4]],
        ],
        release: [
          [0xe00d, [7]],
          [0xe004, [1]],
        ],
      },
    },
    site: [{ bus: "rtu", unit: 3, name: "solaredge", ...BENCH_HYBRID, capacity_wh: 9700 }],
    world: {},
  }),
  row({
    kind: "battery",
    schema: z.strictObject({
      ...hybrid,
      model: z.literal("deye-hybrid"),
      rated_power_w: ratedPower(8000),
      /** The single-phase SG0xLP1 or the three-phase SG04LP3 register map. */
      variant: z.enum(["single-phase", "three-phase"]).default("single-phase"),
      /** Register 0 when not the variant's own (3 / 5, HV 6): another code the public definitions list (0x0600, 0x0601). */
      device_type: z.union([z.literal(3), z.literal(5), z.literal(6), z.literal(0x0600), z.literal(0x0601)]).optional(),
      /** Three-phase only: the HV models' units (SG01HP3: 0.1 V battery voltage, 10 W battery and program powers). */
      hv: z.boolean().default(false),
      /**
       * Which time-of-use program is in force when the start times are out of order, a point
       * the public sources leave open: `latest-start`, the program whose start passed last;
       * `ascending`, only the programs whose start follows the previous active one's.
       */
      program_times: z.enum(["latest-start", "ascending"]).default("latest-start"),
      /** What limits a grid charge: the grid-charge current (230 / 128, A) or the program's power (W). */
      grid_charge_limit: z.enum(["current", "program-power"]).default("current"),
    }),
    build: (s, site) => [new DeyeHybrid(s, site)],
    /**
     * The three-phase SG04LP3 map. Its own mode: the timer off, or on with no program
     * charging from the grid or selling and the load limit not at "allow export" (selling first).
     */
    battery: {
      powerW: async (read, u) => dec.s16((await read(u, "holding", 590, 1))[0]!),
      selfConsumption: async (read, u) => {
        const [timer] = await read(u, "holding", 146, 1);
        if ((timer! & 1) === 0) return true;
        const [limit] = await read(u, "holding", 142, 1);
        const flags = await read(u, "holding", 172, 6);
        return limit !== 0 && flags.every((f) => (f & 0x41) === 0);
      },
      commands: {
        charge: [[146, [1]], [130, [1]], [128, [40]], ...six(166, 100), ...six(172, 1)],
        discharge: [...six(166, 10), ...six(154, 2000), ...six(172, 0x40)],
        release: [[146, [0]]],
      },
    },
    site: [
      {
        bus: "rtu",
        unit: 4,
        name: "deye",
        variant: "three-phase",
        rated_power_w: 8000,
        max_power_w: 5000,
        capacity_wh: 10240,
        pv_max_w: 5000,
        self_use_load_pct: 14,
      },
      // The single-phase map, which its own profile reads (deye-hybrid-1p).
      {
        bus: "rtu",
        unit: 5,
        name: "deye1p",
        profile: "deye-hybrid-1p",
        variant: "single-phase",
        rated_power_w: 6000,
        max_power_w: 5000,
        capacity_wh: 10240,
        pv_max_w: 0,
        self_use_load_pct: 0,
      },
    ],
    world: { variant: "three-phase" },
  }),
  row({
    kind: "battery",
    schema: z.strictObject({ ...hybrid, model: z.literal("goodwe-et"), rated_power_w: ratedPower(10000) }),
    build: (s, site) => [new GoodweEt(s, site)],
    battery: {
      powerW: async (read, u) => dec.s32(await read(u, "holding", 35182, 2), "hi-lo"),
      selfConsumption: async (read, u) => (await read(u, "holding", 47511, 1))[0] === 1,
      commands: {
        charge: [
          [47512, [2000]],
          [47511, [11]],
        ],
        discharge: [[47511, [12]]],
        release: [[47511, [1]]],
      },
    },
    site: [{ bus: "rtu", unit: 247, name: "goodwe", ...BENCH_HYBRID, capacity_wh: 10000 }],
    world: {},
  }),
  row({
    kind: "battery",
    schema: z.strictObject({
      ...hybrid,
      model: z.literal("victron-gx"),
      /** The VE.Bus service's unit id; `unit` is the GX's system/settings unit (100 on a real GX). */
      vebus_unit: unit.default(227),
      /** The ESS mode (2902) the installer set: 1 and 2 Victron's own loop, 3 external control. */
      ess_mode: z.union([z.literal(1), z.literal(2), z.literal(3)]).default(1),
    }),
    build: (s, site) => {
      const gx = new VictronGx(s, site);
      return [gx, gx.vebus];
    },
    units: (s) => [s.unit, s.vebus_unit],
    pairedUnit: (s) => s.vebus_unit,
    /**
     * The system and settings service answer on unit 100, whatever the VE.Bus unit the device is
     * paired on. The brands site's GX is in ESS mode 3 (external control), where its own mode
     * between events is the Multi idle at a zero mode-3 setpoint (37).
     */
    battery: {
      powerW: async (read) => -dec.s16((await read(100, "holding", 842, 1))[0]!),
      selfConsumption: async (read, unit) =>
        (await read(100, "holding", 2902, 1))[0] === 3 && dec.s16((await read(unit, "holding", 37, 1))[0]!) === 0,
      // A GX in mode 3 between events: the Multi idles (nothing external drives it).
      ownMode: "idle",
      commands: {
        charge: [[37, [2000]]],
        discharge: [[37, [-2000 & 0xffff]]],
        release: [[37, [0]]],
      },
    },
    site: [
      {
        bus: "tcp",
        unit: 100,
        name: "victron",
        vebus_unit: 227,
        ess_mode: 3,
        max_power_w: 5000,
        capacity_wh: 10000,
        pv_max_w: 3000,
        self_use_load_pct: 15,
      },
    ],
    // Not in the dispatch world: its profile delivers the request (ESS mode 3), but
    // the GX's system and settings answer on the fixed unit 100, which the world's one unit per
    // battery cannot place (docs/testing.md, "Brand batteries in the world").
  }),
  row({
    kind: "meter",
    schema: z.strictObject({ ...common, model: z.literal("sdm72"), reads, serial: z.number().int().min(0).max(0xffffffff).optional() }),
    build: (s, site) => [new Sdm72(s, site)],
    site: [{ bus: "rtu", unit: 10, name: "sdm72", reads: "grid" }],
  }),
  row({
    kind: "meter",
    schema: z.strictObject({ ...common, model: z.literal("sdm120"), reads, serial: z.number().int().min(0).max(0xffffffff).optional() }),
    build: (s, site) => [new Sdm120(s, site)],
    site: [{ bus: "rtu", unit: 11, name: "sdm120", reads: "load" }],
  }),
  row({
    kind: "meter",
    schema: z.strictObject({
      ...common,
      model: z.literal("em24"),
      reads,
      /** em24: EM24-DIN on RS-485; em24-e1: the EM24 Ethernet; em340: the EM330/340 (the E1's layout). */
      variant: z.enum(["em24", "em24-e1", "em340"]).default("em24"),
      serial: z
        .string()
        .regex(/^[A-Za-z0-9]{1,14}$/)
        .optional(),
    }),
    build: (s, site) => [new Em24(s, site)],
    site: [
      // The EM24-DIN's own map, which the profile (the E1's layout) does not read.
      { bus: "rtu", unit: 12, name: "em24", profile: false, reads: "grid" },
      { bus: "rtu", unit: 13, name: "em340", variant: "em340", reads: "load" },
      { bus: "tcp", unit: 1, shared_unit: 14, name: "em24e1", variant: "em24-e1", reads: "grid" },
    ],
  }),
] as const;

export const BRAND_MODELS: readonly string[] = BRANDS.map((r) => r.model);

export function brandRow(model: string): BrandRow {
  const r = BRANDS.find((b) => b.model === model);
  if (!r) throw new Error(`no brand model "${model}"`);
  return r as unknown as BrandRow;
}

export function buildBrandDevices(spec: { model: string }, site: SiteModel): SimDevice[] {
  return brandRow(spec.model).build(spec as never, site);
}
