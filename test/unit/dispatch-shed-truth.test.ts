// What a shed (and the events beside it) reports against what the site really did. A tiny
// site model on the injected clock stands for the meter: import = base load + loads that
// are on - PV - battery discharge; each test keeps the true drop the shed caused and holds
// the reported delivery to it (B4: within 10 % or 0.2 kW). No sleeps: the clock is moved by hand.
import { test } from "node:test";
import assert from "node:assert/strict";
import { T0, drRequest, unitRig } from "../support/dispatch-unit.js";
import { assertTruth, at, devs, flush, mean, model, req, resp, run, thermostat, withThermostat } from "../support/shed-site.js";
import { battery, meter, pv, relay } from "../support/fake-devices.js";
import { RollingWindow } from "../../src/dispatch/measure.js";

test("a 3 kW shed on a site with PV switches its loads off and never curtails PV: import never rises above the baseline", async () => {
  const r = unitRig([meter("grid", 5000), relay("r1"), pv("pv", 6000, 3000), pv("pv2", 3000, 1000)]);
  try {
    const m = model(r, { base: 6000, loads: { r1: 2000 }, pv: { pv: 3000, pv2: 1000 }, meter: true });
    await run(r, m, T0 + 9_000);
    const before = m.grid();
    const ev = req([{ event_quantity: 3 }]).event_slots[0];
    r.d.submit({ mode: "live", event_slots: [ev] });
    const w = {
      from: T0 + 10_000,
      to: T0 + 70_000,
      before,
      drop: () => 2000 - m.loadW("r1"),
      samples: [] as number[],
      maxGrid: [] as number[],
    };
    await run(r, m, T0 + 71_000, w);
    assert.ok(!r.dev.writes.some((x) => x.id === "pv" || x.id === "pv2"), JSON.stringify(r.dev.writes));
    assert.ok(Math.max(...w.maxGrid) <= before, `import rose to ${Math.max(...w.maxGrid)} W from ${before} W`);
    const b = resp(r, ev.event_id);
    assert.equal(b.status, "partial", JSON.stringify(b));
    assert.deepEqual(
      devs(b).map((d) => d.device_id),
      ["r1"],
    );
    assertTruth(b, mean(w.samples));
  } finally {
    r.close();
  }
});

test("without a meter a 3 kW shed counts each load once (its rating), never PV's own drop; measured false", async () => {
  const r = unitRig([relay("r1", { rated_power_w: 1000 }), pv("pv", 6000, 3000)]);
  try {
    const m = model(r, { base: 3000, loads: { r1: 1000 }, pv: { pv: 3000 }, meter: false });
    const ev = req([{ event_quantity: 3 }]).event_slots[0];
    r.d.submit({ mode: "live", event_slots: [ev] });
    const w = { from: T0 + 10_000, to: T0 + 70_000, before: 0, drop: () => 1000 - m.loadW("r1"), samples: [] as number[] };
    await run(r, m, T0 + 71_000, w);
    const b = resp(r, ev.event_id);
    assert.ok(!r.dev.writes.some((x) => x.id === "pv"), JSON.stringify(r.dev.writes));
    assert.equal(b.details.measured, false);
    assertTruth(b, mean(w.samples));
  } finally {
    r.close();
  }
});

test("a metered plug and a thermostat: the meter's drop counts once (the setback is not added on top); each device has its own share", async () => {
  const plug = relay("plug", { metrics: { power_w: 2000 }, shed_priority: 1 });
  const r = unitRig([meter("grid", 5000), plug, thermostat("trv", { rated_power_w: 1500, shed_priority: 2 })]);
  try {
    withThermostat(r, "trv");
    const m = model(r, { base: 1000, loads: { plug: 2000 }, thermostats: { trv: 1500 }, meter: true, metered: ["plug"] });
    await run(r, m, T0 + 9_000);
    const ev = req([{ event_quantity: 3.5 }]).event_slots[0];
    r.d.submit({ mode: "live", event_slots: [ev] });
    const w = {
      from: T0 + 10_000,
      to: T0 + 70_000,
      before: 0,
      drop: () => 2000 - m.loadW("plug") + (m.heating("trv") ? 0 : 1500),
      samples: [] as number[],
    };
    await run(r, m, T0 + 71_000, w);
    const b = resp(r, ev.event_id);
    assert.equal(r.dev.reg("trv", "holding", 0), 210, "set back, then put back");
    assertTruth(b, mean(w.samples));
    assert.equal(b.details.measured, true, JSON.stringify(b.details));
    const d = new Map(devs(b).map((x) => [x.device_id, x]));
    assert.ok(Math.abs(d.get("plug")!.delivered_w - 2000) <= 100, JSON.stringify(b.details));
    assert.ok(Math.abs(d.get("trv")!.delivered_w - 1500) <= 100, JSON.stringify(b.details));
  } finally {
    r.close();
  }
});

test("a discharge that ends during a shed does not spoil it: the baseline is the quiet minute before the discharge, the battery compensated to the end", async () => {
  const r = unitRig([meter("grid", 5000), battery("b1", 5000), relay("r1", { shed_priority: 1 }), relay("r2", { shed_priority: 2 })]);
  try {
    const m = model(r, { base: 3000, loads: { r1: 1000, r2: 1000 }, batteries: ["b1"], meter: true });
    await run(r, m, T0 + 9_000);
    const dis = drRequest([{ end_time: at(40_000) }], { event_type: "discharge", event_quantity: 3 }).event_slots[0];
    const ev = req([{ start_time: at(30_000), end_time: at(90_000) }]).event_slots[0];
    r.d.submit({ mode: "live", event_slots: [dis, ev] });
    const w = { from: T0 + 30_000, to: T0 + 90_000, before: 0, drop: () => 2000 - m.loadW("r1") - m.loadW("r2"), samples: [] as number[] };
    await run(r, m, T0 + 91_000, w);
    const b = resp(r, ev.event_id);
    assert.deepEqual(
      devs(b).map((d) => d.device_id),
      ["r1"],
      "one relay covers it; nothing more is shed when the discharge ends",
    );
    assert.equal(b.status, "completed", JSON.stringify(b));
    assertTruth(b, mean(w.samples));
  } finally {
    r.close();
  }
});

test("a shed 34 s after another takes its baseline from the quiet minute before the first, not from a minute that holds it", async () => {
  const r = unitRig([
    meter("grid", 5000),
    relay("r1", { shed_priority: 1 }),
    relay("r2", { shed_priority: 2 }),
    relay("r3", { shed_priority: 3 }),
  ]);
  try {
    const m = model(r, { base: 2000, loads: { r1: 1000, r2: 1000, r3: 1000 }, meter: true });
    await run(r, m, T0 + 9_000);
    const a = req([{ end_time: at(40_000) }]).event_slots[0];
    const b = req([{ start_time: at(74_000), end_time: at(134_000) }]).event_slots[0];
    r.d.submit({ mode: "live", event_slots: [a, b] });
    await run(r, m, T0 + 74_000);
    const w = {
      from: T0 + 74_000,
      to: T0 + 134_000,
      before: 0,
      drop: () => 3000 - m.loadW("r1") - m.loadW("r2") - m.loadW("r3"),
      samples: [] as number[],
    };
    await run(r, m, T0 + 135_000, w);
    const rb = resp(r, b.event_id);
    assert.deepEqual(
      devs(rb).map((d) => d.device_id),
      ["r1"],
      JSON.stringify(rb.details),
    );
    assertTruth(rb, mean(w.samples));
  } finally {
    r.close();
  }
});

// Without a meter, shed B (priority 10, 10-40 s, 2.5 kW) switches off r1 (rated per coil) and
// the metered plug p; shed A (priority 20, 4 kW) gets only what B left, r2 and r3, until B
// ends and A takes r1 and p over, already off: a reading of them then says 0 W, but A
// delivers what they drew before B switched them off.
for (const c of [
  // A's requested share of p is what is still missing after r1, at most the plug's 1,500 W.
  { when: "while the other runs", a_from: 20_000, p_requested: 1000 },
  { when: "the instant the other ends", a_from: 40_000, p_requested: 1500 },
]) {
  test(`without a meter, a shed that starts ${c.when} and takes over its loads off is credited with what they drew before`, async () => {
    const r = unitRig([
      relay("r1", { rated_power_w: [250, 250, 250, 250], shed_priority: 1 }),
      relay("p", { metrics: { power_w: 1500 }, shed_priority: 2 }),
      relay("r2", { rated_power_w: 1000, shed_priority: 3 }),
      relay("r3", { rated_power_w: 1000, shed_priority: 4 }),
    ]);
    try {
      const m = model(r, { base: 2000, loads: { r1: 1000, p: 1500, r2: 1000, r3: 1000 }, meter: false, metered: ["p"] });
      const b = req([{ event_quantity: 2.5, start_time: at(10_000), end_time: at(40_000) }]).event_slots[0];
      const a = req([{ event_quantity: 4, priority: 20, start_time: at(c.a_from), end_time: at(c.a_from + 60_000) }]).event_slots[0];
      r.d.submit({ mode: "live", event_slots: [b, a] });
      const off = (id: string, w: number) => w - m.loadW(id);
      const w = {
        from: T0 + c.a_from,
        to: T0 + c.a_from + 60_000,
        before: 0,
        // B drives r1 and p until it ends; from then on they are A's.
        drop: () => off("r2", 1000) + off("r3", 1000) + (r.clock.now() > T0 + 40_000 ? off("r1", 1000) + off("p", 1500) : 0),
        samples: [] as number[],
      };
      await run(r, m, T0 + c.a_from + 61_000, w);
      const ra = resp(r, a.event_id);
      assert.equal(ra.details.measured, false, JSON.stringify(ra.details));
      assertTruth(ra, mean(w.samples));
      const d = new Map(devs(ra).map((x) => [x.device_id, x]));
      assert.equal(d.get("r1")?.requested_w, 1000, JSON.stringify(ra.details));
      assert.equal(d.get("p")?.requested_w, c.p_requested, JSON.stringify(ra.details));
      assert.ok(d.get("r1")!.delivered_w > 0 && d.get("p")!.delivered_w > 0, JSON.stringify(ra.details));
    } finally {
      r.close();
    }
  });
}

test("with a meter, a metered plug a shed takes over from another, already off, is credited with its own drop from before the other switched it off", async () => {
  const r = unitRig([
    meter("grid", 5000),
    relay("p", { metrics: { power_w: 1500 }, shed_priority: 1 }),
    relay("r2", { rated_power_w: 1000, shed_priority: 2 }),
  ]);
  try {
    const m = model(r, { base: 2000, loads: { p: 1500, r2: 1000 }, meter: true, metered: ["p"] });
    await run(r, m, T0 + 9_000);
    const b = req([{ event_quantity: 1.5, start_time: at(10_000), end_time: at(40_000) }]).event_slots[0];
    const a = req([{ event_quantity: 2.5, priority: 20, start_time: at(20_000), end_time: at(80_000) }]).event_slots[0];
    r.d.submit({ mode: "live", event_slots: [b, a] });
    const off = (id: string, w: number) => w - m.loadW(id);
    const w = {
      from: T0 + 20_000,
      to: T0 + 80_000,
      before: 0,
      drop: () => off("r2", 1000) + (r.clock.now() > T0 + 40_000 ? off("p", 1500) : 0),
      samples: [] as number[],
    };
    await run(r, m, T0 + 81_000, w);
    const ra = resp(r, a.event_id);
    assertTruth(ra, mean(w.samples));
    // The plug's own drop (1,500 W before B, 0 W now) for the 40 s of A's 60 s window it is A's.
    const p = devs(ra).find((x) => x.device_id === "p")!;
    assert.equal(p.requested_w, 1500, JSON.stringify(ra.details));
    assert.ok(Math.abs(p.delivered_w - 1000) <= 50, JSON.stringify(ra.details));
  } finally {
    r.close();
  }
});

test("without a meter a relay without rated_power_w is not a measured 0 W: measured false", async () => {
  const r = unitRig([relay("r1")]);
  try {
    const m = model(r, { base: 3000, loads: { r1: 1000 }, meter: false });
    const ev = req([{}]).event_slots[0];
    r.d.submit({ mode: "live", event_slots: [ev] });
    await run(r, m, T0 + 71_000);
    const b = resp(r, ev.event_id);
    assert.equal(b.details.measured, false, JSON.stringify(b.details));
  } finally {
    r.close();
  }
});

test("an offline relay the shed would have used is listed as skipped with its error", async () => {
  const r = unitRig([relay("r1", { online: false, rated_power_w: 1000 }), relay("r2", { rated_power_w: 1000 })]);
  try {
    const m = model(r, { base: 3000, loads: { r1: 1000, r2: 1000 }, meter: false });
    const ev = req([{}]).event_slots[0];
    r.d.submit({ mode: "live", event_slots: [ev] });
    await run(r, m, T0 + 71_000);
    const b = resp(r, ev.event_id);
    assert.deepEqual(
      devs(b).map((d) => [d.device_id, d.status, d.error]),
      [
        ["r1", "skipped", "offline"],
        ["r2", "completed", undefined],
      ],
      JSON.stringify(b.details),
    );
  } finally {
    r.close();
  }
});

test("a device whose write succeeded but that brought no drop is not completed", async () => {
  const r = unitRig([meter("grid", 5000), relay("r1")]);
  try {
    const m = model(r, { base: 3000, loads: { r1: 0 }, meter: true });
    await run(r, m, T0 + 9_000);
    const ev = req([{}]).event_slots[0];
    r.d.submit({ mode: "live", event_slots: [ev] });
    await run(r, m, T0 + 71_000);
    const b = resp(r, ev.event_id);
    assert.equal(b.status, "failed");
    assert.equal(devs(b)[0].status, "failed", JSON.stringify(b.details));
  } finally {
    r.close();
  }
});

test("a restore puts back what the shed changed and leaves the PV a pv_limit drives alone (not failed); pv_limit's delivery is PV's own drop", async () => {
  const r = unitRig([relay("r1"), pv("pv", 6000, 3000)]);
  try {
    const m = model(r, { base: 3000, loads: { r1: 1000 }, pv: { pv: 3000 }, meter: false });
    await run(r, m, T0 + 5_000);
    r.d.submitLocal({
      event_id: "local-input-1",
      source: "input:gpio-1",
      mode: "live",
      event_type: "pv_limit",
      quantity: 0,
      unit: "kW",
      quantity_w: 0,
      start_ms: T0 + 5_000,
      end_ms: T0 + 3_600_000,
      priority: 0,
      mandatory: true,
      cancelled: false,
      limit_pct: 25,
    });
    const shed = req([{ end_time: at(600_000) }]).event_slots[0];
    const restore = req([{ event_type: "restore", event_quantity: 0, start_time: at(30_000), end_time: at(40_000) }]).event_slots[0];
    r.d.submit({ mode: "live", event_slots: [shed, restore] });
    await run(r, m, T0 + 41_000);
    const rb = resp(r, restore.event_id);
    assert.deepEqual(
      devs(rb).map((d) => [d.device_id, d.status]),
      [["r1", "completed"]],
      JSON.stringify(rb.details),
    );
    assert.equal(rb.status, "completed");
    assert.equal(r.dev.reg("pv", "holding", 200), 1, "the PV limit stays while the pv_limit runs");
    r.d.endLocal("input:gpio-1", "released");
    await run(r, m, T0 + 42_000);
    const row = r.d.list().find((e) => e.spec.event_id === "local-input-1")!;
    // 25 % of 6 kW is 1.5 kW, so PV dropped from 3 kW by 1.5 kW for most of the window.
    const q = (row.result as { details: { delivered_quantity: number } }).details.delivered_quantity;
    assert.ok(q > 1.2 && q <= 1.5, JSON.stringify(row.result));
  } finally {
    r.close();
  }
});

test("a 0.14 kW discharge on a 5 kW battery is written as 2.8 %, not rounded to whole percent", async () => {
  const r = unitRig([battery("b1", 5000)]);
  try {
    const ev = drRequest([{}], { event_type: "discharge", event_quantity: 0.14 }).event_slots[0];
    r.d.submit({ mode: "live", event_slots: [ev] });
    r.clock.advance(10_000);
    await flush();
    assert.equal(r.dev.writes.find((w) => w.action === "discharge")?.pct, 2.8, JSON.stringify(r.dev.writes));
  } finally {
    r.close();
  }
});

test("with no quiet minute in the 15 min before a shed (a pv_limit holds PV all along), the shed is estimated from its loads: measured false", async () => {
  const r = unitRig([meter("grid", 5000), relay("r1", { rated_power_w: 1000 }), pv("pv", 6000, 3000)]);
  try {
    const m = model(r, { base: 3000, loads: { r1: 1000 }, pv: { pv: 3000 }, meter: true });
    await run(r, m, T0 + 4_000);
    r.d.submitLocal({
      event_id: "local-input-2",
      source: "input:gpio-1",
      mode: "live",
      event_type: "pv_limit",
      quantity: 0,
      unit: "kW",
      quantity_w: 0,
      start_ms: T0 + 5_000,
      end_ms: T0 + 3_600_000,
      priority: 0,
      mandatory: true,
      cancelled: false,
      limit_pct: 50,
    });
    const ev = req([{ start_time: at(17 * 60_000), end_time: at(18 * 60_000) }]).event_slots[0];
    r.d.submit({ mode: "live", event_slots: [ev] });
    await run(r, m, T0 + 18 * 60_000 + 1_000);
    const b = resp(r, ev.event_id);
    assert.equal(b.details.measured, false, JSON.stringify(b.details));
    assert.ok(Math.abs((b.details.delivered_quantity as number) - 1) <= 0.05, JSON.stringify(b.details));
  } finally {
    r.close();
  }
});

test("the power history: the mean of whole one-second buckets in the minute before a time, kept for 16 min and no longer", () => {
  const w = new RollingWindow(60_000, 16 * 60_000);
  for (let t = 0; t < 20 * 60_000; t += 250) w.add(T0 + t, t < 10 * 60_000 ? 1000 : 3000);
  assert.equal(w.mean(T0 + 10 * 60_000), 1000, "the minute before 10:00 holds only the first level");
  assert.equal(w.mean(T0 + 10 * 60_000 + 500), 1000, "the bucket holding the time itself is not whole: left out");
  assert.equal(w.mean(T0 + 11 * 60_000), 3000);
  assert.equal(w.mean(T0 + 3 * 60_000), undefined, "older than 16 min: gone");
  w.add(T0, 5); // a sample older than the latest is dropped
  assert.equal(w.mean(T0 + 20 * 60_000), 3000);
});
