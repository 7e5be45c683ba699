// fast-check arbitraries of whole sites and event sequences for dispatch-world.ts: 0-2
// batteries at every control scale factor, 0-2 PV inverters, relays rated or not, metered
// and unmetered Zigbee plugs and thermostats, with or without a grid meter, random load and
// sun; 1-4 events of every kind that overlap, with priorities, some cancelled.
// With `faults` (worldArbWith({ faults: true }), and worldArb unless DISPATCH_WORLD_FAULTS=0),
// the harder sites of issue 39: device faults (ignored writes, refused writes, exception
// answers, devices offline mid-event and back, late answers), gateway restarts mid-event
// (crash or clean stop), hybrid batteries that self-consume when idle, and house-load
// steps and PV clouds. On by default; DISPATCH_WORLD_FAULTS=0 generates the plain sites.
// The harder sites also have brand batteries (dispatch-world-brands.ts) unless
// DISPATCH_WORLD_BRANDS=0, which gives a seed's worlds as they were before them.
import fc from "fast-check";
import type { EventKindName, WorldEvent, WorldSpec } from "./dispatch-world.js";
import { WORLD_FAULT_KINDS, type WorldFault, type WorldRestart, type WorldStep } from "./dispatch-world-faults.js";
import { withBrandBatteries } from "./dispatch-world-brands.js";

const sf = fc.constantFrom<-2 | -1 | 0 | 1>(-2, -1, 0, 1);
const kw = (min: number, max: number) => fc.integer({ min, max }).map((k) => k * 1000);
const shedPriority = fc.option(fc.integer({ min: 0, max: 300 }), { nil: undefined });

const battery = fc.record({
  max_power_w: kw(1, 10),
  capacity_wh: fc.constantFrom(5000, 10000, 20000),
  soc_pct: fc.integer({ min: 5, max: 95 }),
  control_sf: sf,
});
const pv = fc.record({ max_power_w: kw(1, 10), control_sf: sf });
const relay = fc.record(
  {
    load_per_coil_w: fc.integer({ min: 1, max: 15 }).map((x) => x * 100),
    rating: fc.constantFrom<"none" | "total" | "per_coil">("none", "total", "per_coil"),
    shed_priority: shedPriority,
  },
  { requiredKeys: ["load_per_coil_w", "rating"] },
);
const plug = fc.record(
  {
    load_w: fc.integer({ min: 2, max: 60 }).map((x) => x * 50),
    metering: fc.boolean(),
    rated: fc.boolean(),
    shed_priority: shedPriority,
  },
  { requiredKeys: ["load_w", "metering", "rated"] },
);
const thermostat = fc.record(
  {
    load_w: fc.integer({ min: 5, max: 30 }).map((x) => x * 100),
    metering: fc.boolean(),
    setpoint_c: fc.integer({ min: 36, max: 48 }).map((x) => x / 2),
    setback_c: fc.integer({ min: 2, max: 8 }).map((x) => x / 2),
    shed_priority: shedPriority,
  },
  { requiredKeys: ["load_w", "metering", "setpoint_c", "setback_c"] },
);

const KINDS: EventKindName[] = ["charge", "discharge", "shed", "restore", "pv_limit"];

const event = fc
  .record({
    type: fc.constantFrom(...KINDS),
    quantity: fc.integer({ min: 1, max: 80 }),
    start_s: fc.integer({ min: 1, max: 120 }),
    duration_s: fc.integer({ min: 15, max: 120 }),
    /** Fraction of the time before start at which the request arrives (1: at the start, above: late). */
    submit: fc.double({ min: 0, max: 1.2, noNaN: true }),
    priority: fc.integer({ min: 1, max: 20 }),
    mandatory: fc.boolean(),
    /** Fraction of the window at which it is cancelled (or the input released). */
    cancel: fc.option(fc.double({ min: 0, max: 1, noNaN: true }), { nil: undefined }),
    limit_pct: fc.integer({ min: 0, max: 100 }),
  })
  .map((e): WorldEvent => {
    const local = e.type === "pv_limit";
    const end = e.start_s + e.duration_s;
    const submit = local ? e.start_s : Math.min(end - 5, Math.max(1, Math.round(e.start_s * e.submit)));
    const from = local ? e.start_s : submit;
    const cancel = e.cancel === undefined ? undefined : Math.min(end - 1, from + 1 + Math.floor(e.cancel * (end - from - 2)));
    return {
      type: e.type,
      quantity_kw: e.type === "restore" || local ? 0 : e.quantity / 10,
      submit_s: submit,
      start_s: e.start_s,
      duration_s: e.duration_s,
      priority: local ? 0 : e.priority,
      mandatory: local || e.mandatory,
      ...(cancel !== undefined ? { cancel_s: cancel } : {}),
      ...(local ? { limit_pct: e.limit_pct } : {}),
    };
  });

const plainWorld: fc.Arbitrary<WorldSpec> = fc.record({
  seed: fc.integer({ min: 1, max: 1_000_000 }),
  base_load_w: fc.integer({ min: 0, max: 60 }).map((x) => x * 100),
  load_noise_pct: fc.integer({ min: 0, max: 5 }),
  irradiance: fc.integer({ min: 0, max: 20 }).map((x) => x / 20),
  meter: fc.boolean(),
  batteries: fc.array(battery, { maxLength: 2 }),
  pvs: fc.array(pv, { maxLength: 2 }),
  relays: fc.array(relay, { maxLength: 2 }),
  plugs: fc.array(plug, { maxLength: 2 }),
  thermostats: fc.array(thermostat, { maxLength: 2 }),
  events: fc.array(event, { minLength: 1, maxLength: 4 }),
});

/** The Modbus devices of a world by name, as scenarioOf() names them (the ones a fault can hit). */
function modbusNames(w: WorldSpec): string[] {
  return [
    ...w.batteries.map((_, i) => `bat${i + 1}`),
    ...w.pvs.map((_, i) => `pv${i + 1}`),
    ...(w.meter ? ["grid"] : []),
    ...w.relays.map((_, i) => `relay${i + 1}`),
  ];
}

/** A fault on one of `names`, set and cleared within the world's events (and a little after). */
function faultOn(names: string[], last_s: number): fc.Arbitrary<WorldFault> {
  return fc
    .record({
      device: fc.constantFrom(...names),
      fault: fc.constantFrom(...WORLD_FAULT_KINDS),
      from_s: fc.integer({ min: 1, max: last_s }),
      length_s: fc.integer({ min: 2, max: 90 }),
      code: fc.constantFrom(2, 3, 4, 6),
      /** late_first: under the answer timeout (only late) or past it (a timeout whose write was applied). */
      delay_ms: fc.constantFrom(300, 1500, 3000),
    })
    .map(({ device, fault, from_s, length_s, code, delay_ms }) => ({
      device,
      fault,
      from_s,
      until_s: from_s + length_s,
      ...(fault === "refuse_writes" || fault === "exception" ? { code } : {}),
      ...(fault === "late_first" ? { delay_ms } : {}),
    }));
}

const restart = (last_s: number): fc.Arbitrary<WorldRestart> =>
  fc.record({ at_s: fc.integer({ min: 2, max: last_s }), down_s: fc.integer({ min: 1, max: 30 }), crash: fc.boolean() });

const step = (last_s: number): fc.Arbitrary<WorldStep> =>
  fc
    .record({
      at_s: fc.integer({ min: 1, max: last_s }),
      load_delta_w: fc.option(
        fc.integer({ min: -30, max: 30 }).map((x) => x * 100),
        { nil: undefined },
      ),
      irradiance: fc.option(
        fc.integer({ min: 0, max: 20 }).map((x) => x / 20),
        { nil: undefined },
      ),
    })
    .map((s) => ({
      at_s: s.at_s,
      ...(s.load_delta_w !== undefined ? { load_delta_w: s.load_delta_w } : {}),
      ...(s.irradiance !== undefined || s.load_delta_w === undefined ? { irradiance: s.irradiance ?? 0 } : {}),
    }));

/** A world with the harder sites: hybrids, device faults, restarts, load steps and clouds. */
const faultWorld: fc.Arbitrary<WorldSpec> = plainWorld.chain((w) => {
  const last = Math.max(2, ...w.events.map((e) => e.start_s + e.duration_s));
  const names = modbusNames(w);
  return fc
    .record({
      hybrid: fc.array(fc.boolean(), { minLength: w.batteries.length, maxLength: w.batteries.length }),
      faults: names.length ? fc.array(faultOn(names, last), { maxLength: 3 }) : fc.constant<WorldFault[]>([]),
      restarts: fc.array(restart(last), { maxLength: 1 }),
      steps: fc.array(step(last), { maxLength: 3 }),
    })
    .map(({ hybrid, faults, restarts, steps }) => ({
      ...w,
      batteries: w.batteries.map((b, i) => (hybrid[i] ? { ...b, hybrid: true } : b)),
      ...(faults.length ? { faults } : {}),
      ...(restarts.length ? { restarts } : {}),
      ...(steps.length ? { steps } : {}),
    }));
});

/**
 * The worlds to generate: `faults` adds the harder sites of issue 39; `brands` (with
 * `faults` only) lets each battery be one of the brand batteries on its profile
 * (dispatch-world-brands.ts). Without `brands`, a seed gives the worlds it gave before them.
 */
export function worldArbWith(opts: { faults: boolean; brands?: boolean }): fc.Arbitrary<WorldSpec> {
  if (!opts.faults) return plainWorld;
  return opts.brands ? withBrandBatteries(faultWorld) : faultWorld;
}

/** Whether worldArb generates the harder sites: yes, unless DISPATCH_WORLD_FAULTS=0. */
export const WORLD_FAULTS = process.env.DISPATCH_WORLD_FAULTS !== "0";
/** Whether the harder sites have brand batteries: yes, unless DISPATCH_WORLD_BRANDS=0. */
export const WORLD_BRANDS = process.env.DISPATCH_WORLD_BRANDS !== "0";

export const worldArb: fc.Arbitrary<WorldSpec> = worldArbWith({ faults: WORLD_FAULTS, brands: WORLD_BRANDS });
