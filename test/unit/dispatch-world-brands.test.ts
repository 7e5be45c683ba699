// The brand batteries of the dispatch property world (test/support/dispatch-world-brands.ts):
// each brand's profile drives its simulator model in the world, the world's truth is the
// model's physics, and the world sees what a brand battery did not do.
import { test } from "node:test";
import assert from "node:assert/strict";
import { runWorld, type WorldSpec } from "../support/dispatch-world.js";
import { WORLD_T0, scenarioOf } from "../support/dispatch-world.js";
import { BRAND_BATTERIES, brandTruth, isBrandSpec, type BrandBattery } from "../support/dispatch-world-brands.js";
import { parseScenario } from "../../hw-sim/scenario.js";
import { SiteModel } from "../../hw-sim/site-model.js";
import { buildBrandDevices } from "../../hw-sim/models/brands/index.js";
import type { HybridInverter } from "../../hw-sim/models/brands/hybrid.js";

const ev = (over: Partial<WorldSpec["events"][number]> & Pick<WorldSpec["events"][number], "type">): WorldSpec["events"][number] => ({
  quantity_kw: 2,
  submit_s: 1,
  start_s: 3,
  duration_s: 30,
  priority: 1,
  mandatory: false,
  ...over,
});

function world(brand: BrandBattery, hybrid: boolean, over: Partial<WorldSpec> = {}): WorldSpec {
  return {
    seed: 7,
    base_load_w: 2500,
    load_noise_pct: 0,
    irradiance: 0.5,
    meter: true,
    batteries: [{ max_power_w: 5000, capacity_wh: 10000, soc_pct: 50, control_sf: 0, hybrid, brand, pv_max_w: 3000 }],
    pvs: [],
    relays: [],
    plugs: [],
    thermostats: [],
    events: [ev({ type: "charge" }), ev({ type: "discharge", quantity_kw: 3, start_s: 40, duration_s: 80 })],
    ...over,
  };
}

for (const brand of BRAND_BATTERIES)
  for (const hybrid of [false, true])
    test(`${brand}${hybrid ? " (a hybrid covering the house load when idle)" : ""}: its profile charges and discharges its model as asked, and puts it back`, async () => {
      const r = await runWorld(world(brand, hybrid));
      assert.deepEqual(r.violations, []);
      const [charge, discharge] = r.events;
      // The truth is the model's battery power: a world that saw nothing would judge nothing.
      assert.ok(Math.abs(charge!.truth_w! - 2000) <= 100, `charge: the simulator saw ${charge!.truth_w} W`);
      assert.ok(Math.abs(discharge!.truth_w! - 3000) <= 100, `discharge: the simulator saw ${discharge!.truth_w} W`);
      assert.deepEqual(
        r.responses.map((x) => x.status),
        ["completed", "completed"],
      );
    });

test("the world's truth of a brand hybrid: idle, it covers its share of the house load less its PV on its own, and none of that is an event's", () => {
  for (const brand of BRAND_BATTERIES) {
    const w = world(brand, true, { batteries: [world(brand, true).batteries[0]!, { ...world(brand, true).batteries[0]!, pv_max_w: 0 }] });
    const sc = parseScenario(scenarioOf(w));
    const site = new SiteModel(sc.site, sc.seed, () => WORLD_T0);
    const truths = sc.ports[0].devices
      .filter((d) => isBrandSpec(d))
      .map((d) => brandTruth(buildBrandDevices(d, site)[0] as HybridInverter, d.model));
    // Two hybrids, 50 % of 2.5 kW each; bat1 has 1.5 kW of its own PV (3 kW at half sun): AC 1.25 kW each.
    assert.deepEqual(
      truths.map((t) => Math.round(t.actual())),
      [-1250, -1250],
      brand,
    );
    assert.deepEqual(
      truths.map((t) => t.own()),
      [0, 0],
      brand,
    );
    assert.match(truths[0]!.state(), /^self-consumption /, brand);
  }
});

test("a brand battery that ignores every write is credited nothing: the world's truth is the model's, not the gateway's", async () => {
  for (const brand of BRAND_BATTERIES) {
    const w = world(brand, true, {
      events: [ev({ type: "discharge", quantity_kw: 3, start_s: 5, duration_s: 30 })],
      faults: [{ device: "bat1", fault: "ignore_writes", from_s: 1, until_s: 40 }],
    });
    const r = await runWorld(w);
    assert.deepEqual(r.violations, [], brand);
    assert.equal(r.responses[0]?.status, "failed", `${brand}: ${JSON.stringify(r.responses[0]?.details)}`);
    assert.ok(r.events[0]!.truth_w! < 50, `${brand}: the simulator saw ${r.events[0]!.truth_w} W`);
  }
});
