// Dispatch against the simulator's ground truth: fast-check generates whole sites and
// event sequences (test/support/dispatch-world-gen.ts), each runs through the real
// dispatcher and device drivers against the simulator's models on an injected clock
// (test/support/dispatch-world.ts), and every invariant of B4 is checked against what the
// simulator really did. A failure shrinks to a minimal world; those found are kept below
// as fixed regression cases. DISPATCH_PROPERTY_RUNS and DISPATCH_PROPERTY_SEED change the
// generated run; `make soak-dispatch` runs 10,000.
import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { INVARIANTS, runWorld, type Invariant, type WorldSpec } from "../support/dispatch-world.js";
import { worldArb } from "../support/dispatch-world-gen.js";
import { E2E_WORLDS } from "../support/dispatch-world-cases.js";

const RUNS = Number(process.env.DISPATCH_PROPERTY_RUNS ?? 500);
const SEED = Number(process.env.DISPATCH_PROPERTY_SEED ?? 20261122);

function describe(broken: ReadonlyArray<{ invariant: Invariant; message: string }>): string {
  return broken.map((v) => `${v.invariant}: ${v.message}`).join("\n");
}

test(`dispatch holds ${INVARIANTS.join(", ")} in ${RUNS} generated sites`, async () => {
  await fc.assert(
    fc.asyncProperty(worldArb, async (w) => {
      const broken = (await runWorld(w)).violations;
      if (broken.length) throw new Error(describe(broken));
    }),
    { numRuns: RUNS, seed: SEED },
  );
});

const quiet = { seed: 1, base_load_w: 0, load_noise_pct: 0, irradiance: 0, batteries: [], pvs: [], relays: [], plugs: [], thermostats: [] };
const ev = (over: Partial<WorldSpec["events"][number]> & Pick<WorldSpec["events"][number], "type">): WorldSpec["events"][number] => ({
  quantity_kw: 0.1,
  submit_s: 1,
  start_s: 1,
  duration_s: 15,
  priority: 1,
  mandatory: false,
  ...over,
});

/**
 * Minimal worlds that fast-check shrank failures to (`make soak-dispatch` prints them), and
 * worlds of the defects the lab found, written by hand.
 */
const REGRESSIONS: Array<{ name: string; world: WorldSpec }> = [
  {
    name: "a shed never curtails PV: it would raise import",
    world: { ...quiet, irradiance: 0.05, meter: false, pvs: [{ max_power_w: 1000, control_sf: -2 }], events: [ev({ type: "shed" })] },
  },
  {
    name: "without a meter, PV's own drop is not a shed's delivery",
    world: {
      ...quiet,
      irradiance: 0.05,
      meter: false,
      pvs: [
        { max_power_w: 1000, control_sf: -2 },
        { max_power_w: 3000, control_sf: -2 },
      ],
      events: [ev({ type: "shed", quantity_kw: 0.2, start_s: 15 })],
    },
  },
  {
    name: "with a meter, a thermostat's setback is counted once",
    world: {
      ...quiet,
      meter: true,
      thermostats: [{ load_w: 500, metering: false, setpoint_c: 18, setback_c: 1 }],
      events: [ev({ type: "shed", start_s: 2 }), ev({ type: "charge" })],
    },
  },
  {
    name: "a device whose write succeeded but delivered nothing is not completed",
    world: {
      ...quiet,
      meter: false,
      relays: [{ load_per_coil_w: 100, rating: "none" }],
      events: [ev({ type: "shed" }), ev({ type: "charge" })],
    },
  },
  {
    name: "with a meter but no reading before the start, an unrated relay shed is not completed with 0 W",
    world: {
      ...quiet,
      meter: true,
      relays: [{ load_per_coil_w: 100, rating: "none" }],
      events: [ev({ type: "shed" }), ev({ type: "charge" })],
    },
  },
  {
    name: "a discharge that ends during a shed does not spoil the shed",
    world: {
      ...quiet,
      seed: 3,
      base_load_w: 2000,
      irradiance: 0.5,
      meter: true,
      batteries: [{ max_power_w: 5000, capacity_wh: 20000, soc_pct: 60, control_sf: 0 }],
      pvs: [{ max_power_w: 6000, control_sf: 0 }],
      relays: [{ load_per_coil_w: 500, rating: "total" }],
      events: [
        ev({ type: "discharge", quantity_kw: 3, start_s: 65, duration_s: 40 }),
        ev({ type: "shed", quantity_kw: 1.5, start_s: 90, duration_s: 60 }),
      ],
    },
  },
  {
    name: "a shed 34 s after another takes its baseline from before the first",
    world: {
      ...quiet,
      seed: 3,
      base_load_w: 2000,
      meter: true,
      relays: [
        { load_per_coil_w: 500, rating: "total" },
        { load_per_coil_w: 500, rating: "total" },
      ],
      events: [
        ev({ type: "shed", quantity_kw: 1.5, start_s: 65, duration_s: 30 }),
        ev({ type: "shed", quantity_kw: 1.5, start_s: 99, duration_s: 60 }),
      ],
    },
  },
  {
    name: "setpoint writes of three events in one tick: the last confirmation read at that instant is the one that holds",
    world: {
      ...quiet,
      meter: false,
      batteries: [{ max_power_w: 1000, capacity_wh: 5000, soc_pct: 5, control_sf: -2 }],
      events: [ev({ type: "charge" }), ev({ type: "charge", quantity_kw: 0.3, cancel_s: 2 }), ev({ type: "charge" })],
    },
  },
  ...E2E_WORLDS.map((c) => ({ name: `in process: ${c.name}`, world: c.world })),
];

for (const r of REGRESSIONS) {
  test(`regression: ${r.name}`, async () => {
    const report = await runWorld(r.world);
    assert.deepEqual(describe(report.violations), "");
  });
}
