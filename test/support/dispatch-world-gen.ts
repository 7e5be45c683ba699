// fast-check arbitraries of whole sites and event sequences for dispatch-world.ts: 0-2
// batteries at every control scale factor, 0-2 PV inverters, relays rated or not, metered
// and unmetered Zigbee plugs and thermostats, with or without a grid meter, random load and
// sun; 1-4 events of every kind that overlap, with priorities, some cancelled.
import fc from "fast-check";
import type { EventKindName, WorldEvent, WorldSpec } from "./dispatch-world.js";

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

export const worldArb: fc.Arbitrary<WorldSpec> = fc.record({
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
