// Each event kind and the device ledger on the injected clock, against the recording
// device layer (test/support/fake-devices.ts): release from the ledger at the end, after a
// crash and at a clean stop; shed order and measurement; restore; stacking; test mode's
// own assignment; no capable device. No sleeps: the fake clock is moved by hand.
import { test } from "node:test";
import assert from "node:assert/strict";
import { openDatabase, migrate } from "../../src/storage/db.js";
import { DISPATCH_MIGRATIONS, emptyProgress, type EventRow } from "../../src/dispatch/store.js";
import type { KindContext } from "../../src/dispatch/kinds/kind.js";
import type { ExecutionResponse } from "../../src/dispatch/dispatcher.js";
import { FakeClock } from "../support/fake-clock.js";
import type { DispatchRequest } from "../../src/dispatch/request.js";
import { shed as shedKind, shedOrder } from "../../src/dispatch/kinds/shed.js";
import { makeTmpDir } from "../support/tmp.js";
import { POLL, T0, drRequest, unitRig, type UnitRig } from "../support/dispatch-unit.js";
import { FakeDevices, battery, meter, planned, pv, relay } from "../support/fake-devices.js";

const flush = () => new Promise((r) => setImmediate(r));

type Rig = UnitRig;
const rig = unitRig;

function req(events: Array<Partial<Record<string, unknown>>>, mode: "live" | "test" = "live"): DispatchRequest {
  return drRequest(events, { event_type: "shed", event_quantity: 1 }, mode);
}

/** One poll a second until `until`; `metrics` gives each device's readings at that moment. */
async function run(r: Rig, until: number, metrics: (now: number) => Record<string, Record<string, number>>): Promise<void> {
  while (r.clock.now() < until) {
    r.clock.advance(POLL);
    const m = metrics(r.clock.now());
    for (const [id, v] of Object.entries(m)) Object.assign(r.dev.list.find((d) => d.device_id === id)!.metrics, v);
    r.d.observe({ ts: r.clock.now(), devices: Object.entries(m).map(([device_id, metrics]) => ({ device_id, metrics })) });
    await flush();
  }
}

const resp = (r: Rig, id: string) => r.responses.find((x) => x.event_id === id)!;
type Dev = { device_id: string; status: string; requested_w: number; delivered_w: number; error?: string };
const devs = (b: ExecutionResponse) => b.details.devices as Dev[];

test("ledger: a shed records the coils' pre-shed state before writing; at end_time they go back to it and an off coil stays off", async () => {
  const r = rig([relay("r1", { rated_power_w: [400, 400, 400, 400] })]);
  try {
    r.dev.setCoils("r1", [true, false, true, true]);
    const rq = req([{}]);
    r.d.submit(rq);
    r.clock.advance(10_000);
    await flush();
    assert.deepEqual(r.dev.coils("r1"), [false, false, false, false]);
    const row = r.db.prepare("SELECT holders, actions, pre FROM dp_ledger WHERE device_id = 'r1'").get() as {
      holders: string;
      actions: string;
      pre: string;
    };
    assert.deepEqual(JSON.parse(row.pre), [{ table: "coil", address: 0, words: [], coils: [true, false, true, true] }]);
    assert.deepEqual(JSON.parse(row.holders), [rq.event_slots[0].event_id]);
    assert.deepEqual(JSON.parse(row.actions), ["shed"]);
    await run(r, T0 + 70_000, () => ({ r1: {} }));
    await flush();
    assert.deepEqual(r.dev.coils("r1"), [true, false, true, true], "pre-shed states, not all on");
    assert.equal((r.db.prepare("SELECT COUNT(*) AS n FROM dp_ledger").get() as { n: number }).n, 0, "the row goes once the device is back");
    assert.ok(!r.dev.remote.has("r1"));
  } finally {
    r.close();
  }
});

test("ledger: a device whose state cannot be read is not written (nothing could put it back)", async () => {
  const r = rig([relay("r1")]);
  try {
    r.dev.unreadable.add("r1");
    const rq = req([{}]);
    r.d.submit(rq);
    r.clock.advance(10_000);
    await flush();
    assert.deepEqual(r.dev.writes, []);
    assert.deepEqual(r.dev.coils("r1"), [true, true, true, true]);
    await run(r, T0 + 70_000, () => ({ r1: {} }));
    const d = devs(resp(r, rq.event_slots[0].event_id))[0];
    assert.equal(d.status, "failed");
    assert.match(d.error!, /does not answer/);
  } finally {
    r.close();
  }
});

test("ledger: after a crash mid-shed, the next start puts the coils back when the shed has ended; a clean stop puts them back at once", async () => {
  const tmp = makeTmpDir();
  const db = openDatabase(tmp.dir);
  migrate(db, [DISPATCH_MIGRATIONS]);
  try {
    const clock = new FakeClock(T0);
    const responses: ExecutionResponse[] = [];
    const dev = new FakeDevices([relay("r1", { rated_power_w: 1200 })], clock);
    dev.setCoils("r1", [true, true, false, true]);
    const a = rig([], { db, clock, dev, responses });
    const shed = req([{}]);
    a.d.submit(shed);
    clock.advance(10_000);
    await flush();
    assert.deepEqual(dev.coils("r1"), [false, false, false, false]);
    // kill -9: the dispatcher is dropped without stop(); the gateway stays down past end_time.
    clock.advance(120_000);
    assert.deepEqual(dev.coils("r1"), [false, false, false, false]);
    const b = rig([], { db, clock, dev, responses });
    await flush();
    assert.deepEqual(dev.coils("r1"), [true, true, false, true], "released at start, from the ledger");
    assert.equal(responses.length, 1);
    assert.notEqual(responses[0].details.reason, "missed");
    assert.equal((db.prepare("SELECT COUNT(*) AS n FROM dp_ledger").get() as { n: number }).n, 0);

    // A clean stop while a shed runs puts the coils back; the restart within the window sheds again.
    const second = req([
      { start_time: new Date(clock.now() + 1000).toISOString(), end_time: new Date(clock.now() + 60_000).toISOString() },
    ]);
    b.d.submit(second);
    clock.advance(1000);
    await flush();
    assert.deepEqual(dev.coils("r1"), [false, false, false, false]);
    await b.d.stop();
    assert.deepEqual(dev.coils("r1"), [true, true, false, true], "a clean stop leaves no load shed");
    const c = rig([], { db, clock, dev, responses });
    await flush();
    assert.deepEqual(dev.coils("r1"), [false, false, false, false], "the running shed takes its devices again");
    await c.d.stop();
    assert.deepEqual(dev.coils("r1"), [true, true, false, true]);
  } finally {
    db.close();
    tmp.cleanup();
  }
});

test("shed order is shed_priority (default 100), then device_id; PV and batteries are never shed", () => {
  const list = planned(relay("z", { shed_priority: 5 }), relay("b"), relay("a", { shed_priority: 300 }));
  assert.deepEqual(
    [...list].sort(shedOrder).map((d) => d.device.id),
    ["z", "b", "a"],
  );
  const [p, b] = planned(pv("pv", 5000, 0), battery("b1", 5000));
  assert.equal(shedKind.capable("shed", p!), false, "curtailing PV raises import");
  assert.equal(shedKind.capable("shed", b!), false);
});

test("shed without a meter: rated loads estimate the drop (coils off before are not counted), each load once, PV never touched, measured false", async () => {
  const r = rig([
    relay("r1", { rated_power_w: [300, 300, 300, 300] }),
    relay("r2", { rated_power_w: 5000, shed_priority: 300 }),
    pv("pv", 6000, 3000),
  ]);
  try {
    r.dev.setCoils("r1", [true, true, true, false]); // 900 W on
    const rq = req([{ event_quantity: 1.5 }]);
    r.d.submit(rq);
    r.clock.advance(10_000);
    await flush();
    await run(r, T0 + 70_000, () => ({ r1: {}, r2: {}, pv: { power_w: 3000 } }));
    const b = resp(r, rq.event_slots[0].event_id);
    assert.deepEqual(
      devs(b).map((d) => [d.device_id, d.requested_w]),
      [
        ["r1", 900],
        ["r2", 600],
      ],
      "r1 (900 W), then r2 (shed_priority 300) for the 600 W missing",
    );
    assert.ok(!r.dev.writes.some((w) => w.id === "pv"), JSON.stringify(r.dev.writes));
    assert.equal(b.details.measured, false);
    assert.equal(b.status, "completed", JSON.stringify(b));
    assert.deepEqual(r.dev.coils("r1"), [true, true, true, false]);
  } finally {
    r.close();
  }
});

test("shed with a meter: the drop is grid import against the quiet minute before start, less a concurrent discharge's change", async () => {
  const r = rig([meter("grid", 5000), relay("r1"), battery("b1", 5000)]);
  try {
    await run(r, T0 + 9_000, () => ({ grid: { power_w: 5000 }, b1: { power_w: 0 } }));
    const shed = req([{ event_quantity: 4, priority: 20 }]).event_slots[0];
    const dis = req([{ event_type: "discharge", event_quantity: 3, priority: 10 }]).event_slots[0];
    r.d.submit({ mode: "live", event_slots: [shed, dis] });
    // The relay carries 1 kW; the battery discharges 3 kW: import falls by 4 kW, 1 kW of it shed.
    await run(r, T0 + 70_000, () => {
      const open = r.dev.coils("r1").every((c) => !c);
      const b1 = r.dev.reg("b1", "holding", 100) === 2 ? 3000 : 0;
      return { grid: { power_w: 5000 - (open ? 1000 : 0) - b1 }, b1: { power_w: b1 } };
    });
    const sb = resp(r, shed.event_id);
    assert.equal(sb.details.measured, true);
    assert.ok(Math.abs((sb.details.delivered_quantity as number) - 1) < 0.05, JSON.stringify(sb.details));
    assert.equal(sb.status, "partial");
    assert.equal(resp(r, dis.event_id).status, "completed");
  } finally {
    r.close();
  }
});

test("restore at the same priority ends the running shed and puts back only what it changed; completed once read back", async () => {
  const r = rig([relay("r1"), relay("r2")]);
  try {
    r.dev.setCoils("r1", [false, true, true, true]);
    const shed = req([{ event_quantity: 1, priority: 30, end_time: new Date(T0 + 600_000).toISOString() }]).event_slots[0];
    const restore = req([
      {
        event_type: "restore",
        event_quantity: 0,
        priority: 30,
        start_time: new Date(T0 + 20_000).toISOString(),
        end_time: new Date(T0 + 30_000).toISOString(),
      },
    ]).event_slots[0];
    r.d.submit({ mode: "live", event_slots: [shed, restore] });
    r.clock.advance(10_000);
    await flush();
    const shedDevices = ["r1", "r2"].filter((id) => r.dev.coils(id).every((c) => !c));
    assert.ok(shedDevices.length > 0);
    await run(r, T0 + 30_000, () => ({ r1: {}, r2: {} }));
    const sb = resp(r, shed.event_id);
    assert.match(sb.details.ended_by as string, /^ended by restore /);
    assert.deepEqual(r.dev.coils("r1"), [false, true, true, true], "the coil off before the shed stays off");
    assert.deepEqual(r.dev.coils("r2"), [true, true, true, true]);
    const rb = resp(r, restore.event_id);
    assert.equal(rb.status, "completed", JSON.stringify(rb));
    assert.deepEqual(
      devs(rb).map((d) => [d.device_id, d.status]),
      shedDevices.map((id) => [id, "completed"]),
    );
    assert.equal(r.d.running(), 0, "the shed does not come back after the restore");
  } finally {
    r.close();
  }
});

test("restore reports failed for a device that does not read back its pre-shed state", async () => {
  const r = rig([relay("r1")]);
  try {
    const shed = req([{ event_quantity: 1, end_time: new Date(T0 + 600_000).toISOString() }]).event_slots[0];
    const restore = req([
      {
        event_type: "restore",
        event_quantity: 0,
        start_time: new Date(T0 + 20_000).toISOString(),
        end_time: new Date(T0 + 30_000).toISOString(),
      },
    ]).event_slots[0];
    r.d.submit({ mode: "live", event_slots: [shed, restore] });
    r.clock.advance(10_000);
    await flush();
    // A relay that ignores the write-back (its coils stay open).
    const write = r.dev.write.bind(r.dev);
    r.dev.write = async (id, ws) => {
      if (!ws.some((w) => w.table === "coil" && w.coils.some(Boolean))) await write(id, ws);
    };
    await run(r, T0 + 30_000, () => ({ r1: {} }));
    const rb = resp(r, restore.event_id);
    assert.equal(rb.status, "failed", JSON.stringify(rb));
    assert.match(devs(rb)[0].error!, /reads 0, was 1 before/);
  } finally {
    r.close();
  }
});

test("stacking: 3 kW at priority 10 and 5 kW at priority 20 on two 5 kW batteries: 4 kW each, measured 3 kW and 5 kW", async () => {
  const r = rig([battery("b1", 5000), battery("b2", 5000)]);
  try {
    const a = req([{ event_type: "discharge", event_quantity: 3, priority: 10 }]).event_slots[0];
    const b = req([{ event_type: "discharge", event_quantity: 5, priority: 20 }]).event_slots[0];
    r.d.submit({ mode: "live", event_slots: [a, b] });
    r.clock.advance(10_000);
    await flush();
    assert.deepEqual(
      r.dev.writes.map((w) => [w.id, w.pct]),
      [
        ["b1", 80],
        ["b2", 80],
      ],
    );
    await run(r, T0 + 70_000, () => ({ b1: { power_w: 4000 }, b2: { power_w: 4000 } }));
    const ra = resp(r, a.event_id);
    const rb = resp(r, b.event_id);
    assert.deepEqual(
      devs(ra).map((d) => d.requested_w),
      [1500, 1500],
    );
    assert.deepEqual(
      devs(rb).map((d) => d.requested_w),
      [2500, 2500],
    );
    assert.ok(Math.abs((ra.details.delivered_quantity as number) - (3 * 59) / 60) < 0.01, JSON.stringify(ra.details));
    assert.ok(Math.abs((rb.details.delivered_quantity as number) - (5 * 59) / 60) < 0.01, JSON.stringify(rb.details));
    assert.equal(ra.status, "completed");
    assert.equal(rb.status, "completed");
    assert.ok(r.dev.writes.filter((w) => w.action === "release").length === 2, "both released at the end");
  } finally {
    r.close();
  }
});

test("test mode plans against what live events hold: a test event at priority 1 never takes a battery from a live one and gets only what is left", async () => {
  const r = rig([battery("b1", 5000)]);
  try {
    const live = req([{ event_type: "discharge", event_quantity: 4, priority: 50 }]);
    const t = req([{ event_type: "discharge", event_quantity: 5, priority: 1 }], "test");
    r.d.submit(live);
    r.d.submit(t);
    r.clock.advance(10_000);
    await flush();
    assert.deepEqual(
      r.dev.writes.map((w) => w.pct),
      [80],
      "the live event alone writes",
    );
    await run(r, T0 + 70_000, () => ({ b1: { power_w: 4000 } }));
    const tb = resp(r, t.event_slots[0].event_id);
    assert.equal(tb.details.mode, "test");
    assert.equal(tb.details.delivered_quantity, 1, "planned on the 1 kW the live event leaves");
    assert.equal(tb.status, "partial");
    assert.equal(resp(r, live.event_slots[0].event_id).status, "completed");
  } finally {
    r.close();
  }
});

test("an event no device can carry is reported failed with reason no_capable_device", async () => {
  const r = rig([meter("grid", 1000)]);
  try {
    const rq = req([{ event_type: "discharge", event_quantity: 2 }]);
    r.d.submit(rq);
    await run(r, T0 + 70_000, () => ({ grid: { power_w: 1000 } }));
    const b = resp(r, rq.event_slots[0].event_id);
    assert.equal(b.status, "failed");
    assert.equal(b.details.reason, "no_capable_device");
  } finally {
    r.close();
  }
});

test("a write the device refuses is retried every 5 s; once the device takes writes again, mid-event, it gets its setpoint", async () => {
  const r = rig([battery("b1", 5000)]);
  try {
    const attempts: number[] = [];
    const write = r.dev.write.bind(r.dev);
    r.dev.write = (id, writes) => {
      attempts.push(r.clock.now());
      return write(id, writes);
    };
    const b1 = r.dev.list[0];
    b1.metrics.fail = 1; // refuses every write
    const ev = req([{ event_type: "discharge", event_quantity: 2.5 }]).event_slots[0];
    r.d.submit({ mode: "live", event_slots: [ev] });
    await run(r, T0 + 30_000, () => ({ b1: { power_w: 0 } }));
    assert.equal(r.dev.reg("b1", "holding", 100), 0, "nothing written while the device refuses");
    const during = attempts.filter((t) => t >= T0 + 10_000 && t <= T0 + 30_000);
    // From start_time to 30 s: a retry every 5 s (not every poll, and not given up).
    assert.ok(during.length >= 4 && during.length <= 6, `attempts at ${during.map((t) => (t - T0) / 1000).join(", ")} s`);
    delete b1.metrics.fail; // the device recovers
    await run(r, T0 + 70_000, () => ({ b1: { power_w: r.dev.reg("b1", "holding", 100) === 2 ? 2500 : 0 } }));
    const first = r.dev.writes.find((w) => w.id === "b1" && w.action === "discharge");
    assert.ok(first, "the setpoint is written once the device takes writes");
    assert.ok(first.at <= T0 + 30_000 + 5_000 + POLL, `written at ${(first.at - T0) / 1000} s, within one retry interval of the recovery`);
    assert.equal(first.pct, 50, "2.5 kW of 5 kW");
    await run(r, T0 + 72_000, () => ({ b1: { power_w: 0 } }));
    const b = resp(r, ev.event_id);
    assert.equal(b.status, "partial", JSON.stringify(b.details));
    assert.ok((b.details.delivered_quantity as number) > 1 && (b.details.delivered_quantity as number) < 2.5, JSON.stringify(b.details));
  } finally {
    r.close();
  }
});

test("shed with a meter steps one device at a time: the next step waits for a meter reading taken after the last write", async () => {
  const r = rig([meter("grid", 5000), relay("r1"), relay("r2")]);
  try {
    await run(r, T0 + 9_000, () => ({ grid: { power_w: 5000 } }));
    const shed = req([{ event_quantity: 1.5 }]).event_slots[0];
    r.d.submit({ mode: "live", event_slots: [shed] });
    const grid = () => 5000 - (r.dev.coils("r1").every((c) => !c) ? 1000 : 0) - (r.dev.coils("r2").every((c) => !c) ? 1000 : 0);
    // The meter is silent for 10 s after start: the first relay is shed, the second waits.
    await run(r, T0 + 20_000, () => ({}));
    assert.deepEqual(r.dev.coils("r1"), [false, false, false, false], "first step taken at start");
    assert.deepEqual(r.dev.coils("r2"), [true, true, true, true], "no second step without a reading after the first");
    // The first reading after it shows 1 kW of 1.5: the next step follows that reading.
    await run(r, T0 + 21_000, () => ({ grid: { power_w: grid() } }));
    await run(r, T0 + 22_000, () => ({ grid: { power_w: grid() } }));
    assert.deepEqual(r.dev.coils("r2"), [false, false, false, false], "second step after the reading");
    await run(r, T0 + 72_000, () => ({ grid: { power_w: grid() } }));
    // The meter was offline for 10 s (B4 stale): that part is estimated from the loads.
    assert.equal(resp(r, shed.event_id).details.measured, false);
  } finally {
    r.close();
  }
});

test("a confirmation read after each setpoint write is one more sample of the battery: delivery and coverage count from the write, not the next poll, and nothing twice", async () => {
  const r = rig([battery("b1", 5000)]);
  try {
    const at = (id: string) => (r.dev.reg(id, "holding", 100) === 2 ? r.dev.reg(id, "holding", 101) * 50 : 0);
    r.dev.power = at;
    const ev = req([{ event_type: "discharge", event_quantity: 2.5 }]).event_slots[0];
    r.d.submit({ mode: "live", event_slots: [ev] });
    r.clock.advance(10_000);
    await flush();
    assert.deepEqual(r.dev.confirms, [{ at: T0 + 10_000, id: "b1" }], "read once, at the write");
    assert.equal(r.dev.list[0].metrics.power_w, 2500, "the latest values have it before any poll");
    await run(r, T0 + 70_000, () => ({ b1: { power_w: at("b1") } }));
    const setpoints = r.dev.writes.filter((w) => w.action === "discharge");
    assert.equal(r.dev.confirms.length, setpoints.length, "one read per setpoint write (the 20 s rewrites too), none after the release");
    const b = resp(r, ev.event_id);
    // Without the confirmation the first second (start to the first poll) would count as 0: 2.5 x 59/60.
    assert.ok(Math.abs((b.details.delivered_quantity as number) - 2.5) < 1e-9, JSON.stringify(b.details));
    assert.equal(b.details.coverage, 1, "driven from the same instant as delivered");
    assert.equal(b.status, "completed");
  } finally {
    r.close();
  }
});

test("a stored shed row naming a step without its device's progress (progress is stored JSON) adds nothing to the drop, and does not throw", () => {
  const progress = {
    ...emptyProgress(),
    shed_steps: ["gone", "r1"],
    devices: { r1: { requested_w: 500, writes_ok: 1, writes_failed: 0, rated_w: 500 } },
  };
  const row = { spec: { event_id: "e1" }, progress } as unknown as EventRow;
  const ctx = { hold: 5000, drivers: () => ["e1"], device: () => undefined, fresh: () => true } as unknown as KindContext;
  shedKind.observe?.(row, ctx, new Map([["gone", { power_w: 900 }]]), T0);
  assert.equal(row.progress.drop?.value, 500, "only r1's rating counts");
  assert.equal(row.progress.estimated, true);
});
