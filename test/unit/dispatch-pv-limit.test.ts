// The pv_limit kind alone (pure logic): every free, fully configured PV inverter capped at
// limit_pct (clamped to 0..100), the others skipped with the reason, and the result's
// per-device status from what was written.
import { test } from "node:test";
import assert from "node:assert/strict";
import { pvLimit } from "../../src/dispatch/kinds/pv-limit.js";
import type { Capacity, KindContext } from "../../src/dispatch/kinds/kind.js";
import type { EventRow } from "../../src/dispatch/store.js";
import { planned, type FakeSpec } from "../support/fake-devices.js";

// A fake PV inverter implements Curtailable; a fake battery PowerControllable only.
const pv = (id: string, over: Partial<FakeSpec> = {}): FakeSpec => ({
  device_id: id,
  role: "pv",
  max_power_w: 6000,
  fully_configured: true,
  online: true,
  metrics: {},
  ...over,
});

function rig(limit: number | undefined) {
  const row = { spec: { event_id: "rse-60", limit_pct: limit }, progress: { devices: {} } } as unknown as EventRow;
  const taken: string[] = [];
  const cap = {
    free: (id: string) => id !== "pv-busy",
    takenBy: () => ["ev-1"],
    take: (id: string) => void taken.push(id),
  } as unknown as Capacity;
  const ctx = {
    devices: planned(pv("pv-b"), pv("pv-a"), pv("pv-busy"), pv("pv-new", { fully_configured: false }), pv("battery", { role: "battery" })),
  } as unknown as KindContext;
  return { row, cap, ctx, taken };
}

test("pv_limit caps every free PV inverter at limit_pct of its rating and skips the others with a reason", () => {
  const { row, cap, ctx, taken } = rig(60);
  const claims = pvLimit.plan(row, ctx, cap);
  assert.deepEqual(claims, [
    { device_id: "pv-a", action: "curtail", pct: 60 },
    { device_id: "pv-b", action: "curtail", pct: 60 },
  ]);
  assert.deepEqual(taken, ["pv-a", "pv-b"]);
  const p = row.progress.devices;
  assert.equal(p["pv-a"].requested_w, 3600);
  assert.match(p["pv-busy"].skipped!, /driven by event ev-1/);
  assert.match(p["pv-new"].skipped!, /not fully configured/);
  assert.equal(p.battery, undefined, "not a PV inverter");
  assert.equal(pvLimit.capable("discharge", planned(pv("x"))[0]!), false);
});

test("pv_limit clamps the limit to 0..100 % and reports per device what was written", () => {
  assert.equal(pvLimit.plan(rig(150).row, rig(150).ctx, rig(150).cap)[0].pct, 100);
  const low = rig(-5);
  assert.equal(pvLimit.plan(low.row, low.ctx, low.cap)[0].pct, 0);
  const none = rig(undefined);
  assert.equal(pvLimit.plan(none.row, none.ctx, none.cap)[0].pct, 100, "no limit given: no cap");

  const { row, cap, ctx } = rig(60);
  pvLimit.plan(row, ctx, cap);
  row.progress.devices["pv-a"].writes_ok = 1;
  row.progress.devices["pv-b"].writes_failed = 2;
  row.progress.devices["pv-b"].error = "timeout";
  const r = pvLimit.result(row, ctx, 0);
  assert.equal(r.status, "partial");
  assert.equal(r.measured, true, "its delivery is PV's own drop, read from the inverters");
  assert.deepEqual(
    r.devices.map((d) => [d.device_id, d.status, d.error]),
    [
      ["pv-a", "completed", undefined],
      ["pv-b", "failed", "timeout"],
      ["pv-busy", "skipped", "driven by event ev-1 (before this one in B4 order)"],
      ["pv-new", "skipped", "not fully configured (REGISTRY_WRITE_FAILED)"],
    ],
  );
  row.progress.devices["pv-b"].writes_ok = 1;
  assert.equal(pvLimit.result(row, ctx, 0).status, "completed");
  const nothing = rig(60);
  pvLimit.plan(nothing.row, nothing.ctx, nothing.cap);
  assert.equal(pvLimit.result(nothing.row, nothing.ctx, 0).status, "failed");
});
