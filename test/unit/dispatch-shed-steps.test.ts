// Issue 39 finding 6 and item 4: a metered shed against house-load steps it did not make.
// Whole worlds (dispatch-world.ts: the real dispatcher on the simulator's models, the truth
// from its physics): a +2 kW step mid-event never makes the shed switch another load, and a
// fall just before the start is never credited to an unrated relay.
import { test } from "node:test";
import assert from "node:assert/strict";
import { runWorld, type WorldSpec } from "../support/dispatch-world.js";

const site = { seed: 1, load_noise_pct: 0, irradiance: 0, meter: true, batteries: [], pvs: [], plugs: [], thermostats: [] };
const shed = { type: "shed" as const, quantity_kw: 1.5, submit_s: 1, start_s: 100, duration_s: 60, priority: 5, mandatory: true };

function devicesOf(report: Awaited<ReturnType<typeof runWorld>>): string[] {
  const r = report.events[0]?.response?.details as { devices?: Array<{ device_id: string }> } | undefined;
  return (r?.devices ?? []).map((d) => d.device_id);
}

test("a +2 kW house-load step mid-event does not make a metered shed switch a second relay (its first covers the quantity)", async () => {
  const world: WorldSpec = {
    ...site,
    base_load_w: 3000,
    // Two unrated relays of 4 x 500 W: the first alone brings 2 kW, more than the 1.5 kW asked.
    relays: [
      { load_per_coil_w: 500, rating: "none", shed_priority: 1 },
      { load_per_coil_w: 500, rating: "none", shed_priority: 2 },
    ],
    events: [shed],
    steps: [{ at_s: 120, load_delta_w: 2000 }],
  };
  const report = await runWorld(world);
  assert.deepEqual(devicesOf(report), ["relay1"]);
  assert.deepEqual(report.violations, []);
});

test("a house-load fall just before a metered shed is not credited to the unrated relay it switched", async () => {
  const world: WorldSpec = {
    ...site,
    base_load_w: 4000,
    relays: [{ load_per_coil_w: 300, rating: "none" }],
    events: [shed],
    steps: [{ at_s: 95, load_delta_w: -2000 }],
  };
  const report = await runWorld(world);
  const e = report.events[0]!;
  // The relay's 4 x 300 W, not the 2 kW the house load fell by as well.
  assert.ok(Math.abs((e.reported_w ?? 0) - 1200) <= 100, `reported ${e.reported_w} W`);
  assert.ok(Math.abs((e.truth_w ?? 0) - 1200) <= 100, `truth ${e.truth_w} W`);
});
