// The dispatcher with an injected clock and a recording device layer: start on time,
// release at the end, one response, restart and missed events, clock steps, overlaps,
// receipts, test mode and local schedules. No sleeps: the fake clock is moved by hand.
import { test } from "node:test";
import assert from "node:assert/strict";
import { openDatabase, migrate } from "../../src/storage/db.js";
import { DISPATCH_MIGRATIONS } from "../../src/dispatch/store.js";
import type { ExecutionResponse } from "../../src/dispatch/dispatcher.js";
import { FakeClock } from "../support/fake-clock.js";
import { allocateProportional, compareEvents, statusFor } from "../../src/dispatch/allocate.js";
import { dispatchRequest, toSpec, type DispatchRequest } from "../../src/dispatch/request.js";
import { LocalSchedules } from "../../src/dispatch/local-schedules.js";
import { battery, planned } from "../support/fake-devices.js";
import { silentLogger } from "../../src/log.js";
import { isSitegateError } from "../../src/errors.js";
import { makeTmpDir } from "../support/tmp.js";
import { POLL, T0, drRequest, unitRig, type UnitRig } from "../support/dispatch-unit.js";

type Rig = UnitRig;
const rig = unitRig;

function req(events: Array<Partial<Record<string, unknown>>>, mode: "live" | "test" = "live"): DispatchRequest {
  return drRequest(events, { event_type: "discharge", event_quantity: 4 }, mode);
}

/** Lets the recording device layer's promise chains settle. */
const flush = () => new Promise((r) => setImmediate(r));

/** Feeds one poll snapshot at the clock's time with each battery delivering its setpoint. */
function poll(r: Rig, power: Record<string, number>): void {
  for (const [id, w] of Object.entries(power)) r.dev.list.find((d) => d.device_id === id)!.metrics.power_w = w;
  r.d.observe({ ts: r.clock.now(), devices: Object.entries(power).map(([device_id, w]) => ({ device_id, metrics: { power_w: w } })) });
}

test("an event writes its first setpoint at start_time, not before; releases at end_time; one measured response", async () => {
  const r = rig([battery("b1", 5000)]);
  try {
    const rq = req([{}]);
    assert.deepEqual(r.d.submit(rq), [{ event_id: rq.event_slots[0].event_id, status: "accepted" }]);
    r.clock.advance(9_999);
    await flush();
    assert.equal(r.dev.writes.length, 0, "nothing before start");
    r.clock.advance(1);
    await flush();
    assert.deepEqual(r.dev.writes, [{ at: T0 + 10_000, id: "b1", action: "discharge", pct: 80 }]);
    assert.ok(r.dev.remote.has("b1"), "op mode 2 while driven");
    for (let t = 0; t < 60; t++) {
      r.clock.advance(POLL);
      if (r.clock.now() < T0 + 70_000) poll(r, { b1: 4000 });
      await flush();
    }
    assert.ok(
      r.dev.writes.some((w) => w.action === "discharge" && w.at === T0 + 30_000),
      "setpoint rewritten before the revert timeout (refresh 20 s)",
    );
    assert.equal(r.dev.writes.at(-1)!.action, "release");
    assert.ok(!r.dev.remote.has("b1"));
    assert.equal(r.responses.length, 1);
    const body = r.responses[0];
    assert.equal(body.status, "completed");
    // The window runs from start_time: the second before the first poll counts as nothing.
    assert.equal(body.details.delivered_quantity, 3.933333);
    assert.equal(body.details.coverage, 0.983);
    assert.equal(body.timestamp, new Date(T0 + 70_000).toISOString());
  } finally {
    r.cleanup();
  }
});

test("a restart resumes a running event; one that ended while down is reported missed, never run", async () => {
  const tmp = makeTmpDir();
  const db = openDatabase(tmp.dir);
  migrate(db, [DISPATCH_MIGRATIONS]);
  try {
    const clock = new FakeClock(T0);
    const responses: ExecutionResponse[] = [];
    const a = rig([battery("b1", 5000)], { db, clock, responses });
    const running = req([{}]);
    const later = req([{ start_time: new Date(T0 + 100_000).toISOString(), end_time: new Date(T0 + 110_000).toISOString() }]);
    a.d.submit(running);
    a.d.submit(later);
    clock.advance(15_000);
    await flush();
    poll(a, { b1: 4000 });
    await a.d.stop(); // the daemon goes down mid-event
    const writesBefore = a.dev.writes.length;
    clock.advance(20_000);
    const b = rig([battery("b1", 5000)], { db, clock, dev: a.dev, responses });
    await flush();
    assert.equal(a.dev.writes.length, writesBefore + 1, "the running event's setpoint is written again at once");
    assert.equal(a.dev.writes.at(-1)!.action, "discharge");
    await b.d.stop();
    clock.advance(200_000); // down past the end of both
    const c = rig([battery("b1", 5000)], { db, clock, dev: a.dev, responses });
    await flush();
    assert.equal(responses.length, 2);
    const missed = responses.find((x) => x.event_id === later.event_slots[0].event_id)!;
    assert.equal(missed.status, "failed");
    assert.equal(missed.details.reason, "missed");
    assert.ok(!a.dev.writes.some((w) => w.at > T0 + 100_000 && w.action === "discharge"), "the missed event never ran");
    const states = c.d
      .list()
      .map((e) => e.state)
      .sort();
    assert.deepEqual(states, ["done", "missed"]);
    await c.d.stop();
  } finally {
    db.close();
    tmp.cleanup();
  }
});

test("a wall-clock step forward into a window starts the event; a step back never runs it again", async () => {
  const r = rig([battery("b1", 5000)]);
  try {
    r.d.submit(req([{ start_time: new Date(T0 + 3_600_000).toISOString(), end_time: new Date(T0 + 3_700_000).toISOString() }]));
    r.clock.step(3_650_000); // NTP after a boot without RTC
    r.clock.advance(5_000); // the step watch notices within 5 s
    await flush();
    assert.equal(r.dev.writes.filter((w) => w.action === "discharge").length, 1, "started once, after the step");
    assert.equal(r.d.stats.started, 1);
    r.clock.advance(50_000);
    await flush();
    assert.equal(r.responses.length, 1);
    const writes = r.dev.writes.length;
    r.clock.step(-200_000); // back before start_time
    r.clock.advance(10_000);
    await flush();
    assert.equal(r.d.stats.started, 1, "never started twice");
    assert.equal(r.dev.writes.length, writes, "no write after the step back");
    assert.equal(r.responses.length, 1);
    assert.equal(r.d.stats.clock_steps, 2);
  } finally {
    r.cleanup();
  }
});

test("receipts: identical repeat, replace before start, 409 after start, cancellation stops a running event", async () => {
  const r = rig([battery("b1", 5000)]);
  try {
    const rq = req([{}]);
    const id = rq.event_slots[0].event_id;
    r.d.submit(rq);
    assert.deepEqual(r.d.submit(rq), [{ event_id: id, status: "accepted" }]);
    const changed = { ...rq, event_slots: [{ ...rq.event_slots[0], event_quantity: 2 }] };
    r.d.submit(changed); // before start: replaces
    r.clock.advance(10_000);
    await flush();
    assert.equal(r.dev.writes[0].pct, 40, "the replacement runs");
    assert.throws(
      () => r.d.submit({ ...rq, event_slots: [{ ...rq.event_slots[0], event_quantity: 3 }] }),
      (e) => isSitegateError(e, "CONFLICT"),
    );
    const cancel = { ...changed, event_slots: [{ ...changed.event_slots[0], cancelled: true }] };
    assert.deepEqual(r.d.submit(cancel), [{ event_id: id, status: "cancelled" }]);
    await flush();
    assert.equal(r.responses.length, 1);
    assert.equal(r.responses[0].details.cancelled, true);
    assert.equal(r.dev.writes.at(-1)!.action, "release");
    assert.deepEqual(r.d.submit(cancel), [{ event_id: id, status: "cancelled" }], "a repeated cancellation is the same receipt");
    assert.equal(r.responses.length, 1);
  } finally {
    r.cleanup();
  }
});

test("stacking: the first event in B4 order takes only what it needs, the next gets what is left; when one ends, the other keeps its share", async () => {
  const r = rig([battery("b1", 5000)]);
  try {
    const low = req([{ event_quantity: 1, priority: 50 }]).event_slots[0];
    const high = req([
      { event_quantity: 3, priority: 5, start_time: new Date(T0 + 20_000).toISOString(), end_time: new Date(T0 + 40_000).toISOString() },
    ]).event_slots[0];
    r.d.submit({ mode: "live", event_slots: [low, high] });
    r.clock.advance(10_000);
    await flush();
    assert.equal(r.dev.writes.at(-1)!.pct, 20);
    r.clock.advance(10_000);
    await flush();
    assert.equal(r.dev.writes.at(-1)!.pct, 80, "3 kW of priority 5 and 1 kW of priority 50 on one setpoint");
    r.clock.advance(20_000);
    await flush();
    assert.equal(r.dev.writes.at(-1)!.pct, 20, "back to the priority-50 event alone");
  } finally {
    r.cleanup();
  }
});

test("overlap: an event gets only what the events before it left, and is measured for its share only", async () => {
  const r = rig([battery("b1", 5000)]);
  try {
    const low = req([{ event_quantity: 3, priority: 50 }]).event_slots[0];
    const high = req([
      { event_quantity: 4, priority: 5, start_time: new Date(T0 + 30_000).toISOString(), end_time: new Date(T0 + 50_000).toISOString() },
    ]).event_slots[0];
    r.d.submit({ mode: "live", event_slots: [low, high] });
    r.clock.advance(10_000);
    await flush();
    // The battery delivers whatever it was last told; one poll a second.
    for (let t = 0; t < 60; t++) {
      r.clock.advance(POLL);
      const last = [...r.dev.writes].reverse().find((w) => w.action === "discharge" || w.action === "release")!;
      if (r.clock.now() < T0 + 70_000) poll(r, { b1: last.action === "discharge" ? (last.pct! / 100) * 5000 : 0 });
      await flush();
    }
    assert.ok(
      r.dev.writes.some((w) => w.pct === 100),
      "4 kW + the 1 kW left for the other",
    );
    const lr = r.responses.find((x) => x.event_id === low.event_id)!;
    const hr = r.responses.find((x) => x.event_id === high.event_id)!;
    assert.equal(hr.status, "completed");
    assert.equal(lr.status, "partial", "20 s of 60 at 1 kW instead of 3 kW");
    // (40 s x 3 kW + 20 s x 1 kW) / 60 s = 2.333 kW
    assert.ok(Math.abs((lr.details.delivered_quantity as number) - 2.333) < 0.05, String(lr.details.delivered_quantity));
    const dev = (lr.details.devices as Array<{ device_id: string; requested_w: number }>)[0];
    assert.equal(dev.device_id, "b1");
  } finally {
    r.cleanup();
  }
});

test("test mode plans and reports like live but writes nothing", async () => {
  const r = rig([battery("b1", 5000), battery("b2", 3000)]);
  try {
    r.d.submit(req([{ event_quantity: 4 }], "test"));
    r.clock.advance(80_000);
    await flush();
    assert.equal(r.dev.writes.length, 0);
    assert.equal(r.responses.length, 1);
    const b = r.responses[0];
    assert.equal(b.details.mode, "test");
    assert.equal(b.details.measured, false);
    assert.equal(b.details.delivered_quantity, 4);
    assert.deepEqual(
      (b.details.devices as Array<{ requested_w: number }>).map((d) => d.requested_w),
      [2500, 1500],
    );
  } finally {
    r.cleanup();
  }
});

test("a cron schedule fires on the scheduler at priority 100, taken up at start when its window is open", async () => {
  const r = rig([battery("b1", 5000)]);
  try {
    // 01:30 in Berlin (UTC+1 in November): the 01:00 night charge of 4 h is running.
    r.clock.step(Date.UTC(2026, 10, 23, 0, 30) - r.clock.now());
    const sched = {
      name: "night-charge",
      cron: "0 1 * * *",
      timezone: "Europe/Berlin",
      duration_s: 14400,
      event_type: "charge" as const,
      event_quantity: 3,
      event_unit: "kW" as const,
    };
    const ls = new LocalSchedules([sched], r.d, silentLogger(), r.clock);
    ls.start();
    try {
      r.clock.advance(0);
      await flush();
      const ev = r.d.list()[0];
      assert.equal(ev.spec.source, "local:night-charge");
      assert.equal(ev.spec.priority, 100);
      assert.equal(new Date(ev.spec.start_ms).toISOString(), "2026-11-23T00:00:00.000Z");
      assert.equal(ev.state, "running");
      assert.deepEqual(
        r.dev.writes.map((w) => [w.action, w.pct]),
        [["charge", 60]],
      );
      // The same occurrence again (a restart, a clock step) adds nothing.
      ls.fire(sched, Date.UTC(2026, 10, 23, 0, 0));
      assert.equal(r.d.list().length, 1);
      // A partner event outranks it.
      r.d.submit(
        req([
          {
            start_time: new Date(r.clock.now() + 1000).toISOString(),
            end_time: new Date(r.clock.now() + 60_000).toISOString(),
            priority: 99,
          },
        ]),
      );
      r.clock.advance(1000);
      await flush();
      assert.equal(r.dev.writes.at(-1)!.action, "discharge");
      assert.equal(r.responses.length, 0, "local schedules send no execution response");
    } finally {
      ls.stop();
    }
  } finally {
    r.cleanup();
  }
});

test("allocation: proportional to max power, capped, unavailable batteries give their share away", () => {
  const b = (id: string, max: number, soc = 50, online = true) => planned({ ...battery(id, max, soc), online })[0]!;
  assert.deepEqual(
    allocateProportional("discharge", 4000, [b("a", 5000), b("b", 3000)]).map((s) => Math.round(s.watts)),
    [2500, 1500],
  );
  assert.deepEqual(
    allocateProportional("discharge", 7500, [b("a", 5000), b("b", 2000)]).map((s) => Math.round(s.watts)),
    [5000, 2000],
  );
  const s = allocateProportional("discharge", 4000, [b("a", 5000, 0), b("b", 5000), b("c", 5000, 50, false)]);
  assert.deepEqual(
    s.map((x) => Math.round(x.watts)),
    [0, 4000, 0],
  );
  assert.match(s[0].skipped!, /empty/);
  assert.equal(s[2].skipped, "offline");
  assert.match(allocateProportional("charge", 1000, [b("a", 5000, 100)])[0].skipped!, /full/);
  assert.equal(statusFor(95, 100), "completed");
  assert.equal(statusFor(94, 100), "partial");
  assert.equal(statusFor(4.9, 100), "failed");
});

test("overlap ties go to mandatory, then the earlier start; live before test", () => {
  const spec = (o: Record<string, unknown>, mode: "live" | "test" = "live") => toSpec(req([o]).event_slots[0], mode);
  const first = (...xs: ReturnType<typeof spec>[]) => [...xs].sort(compareEvents)[0].event_id;
  const a = spec({ priority: 10, mandatory: false });
  const m = spec({ priority: 10, mandatory: true, start_time: new Date(T0 + 20_000).toISOString() });
  assert.equal(first(a, m), m.event_id);
  const early = spec({ priority: 10, mandatory: true, start_time: new Date(T0 + 5_000).toISOString() });
  assert.equal(first(m, early), early.event_id);
  const t = spec({ priority: 1 }, "test");
  assert.equal(first(t, a), a.event_id);
});

test("request validation: one path per problem", () => {
  const r = dispatchRequest.safeParse({
    mode: "live",
    event_slots: [
      {
        event_id: "not-a-uuid",
        start_time: "2026-01-01T10:00:00+02:00",
        end_time: "2026-01-01T09:00:00Z",
        event_type: "boost",
        event_quantity: -1,
        event_unit: "GW",
        priority: 0,
        mandatory: "yes",
        cancelled: false,
      },
    ],
  });
  assert.equal(r.success, false);
  const paths = r.error!.issues.map((i) => i.path.join("."));
  for (const p of ["event_id", "start_time", "event_type", "event_quantity", "event_unit", "priority", "mandatory"])
    assert.ok(paths.includes(`event_slots.0.${p}`), `${p} in ${paths}`);
});

test("group commit: requests of one turn share a transaction, a conflicting one fails alone; a cancelled event stays cancelled", async () => {
  const r = rig([battery("b1", 5000)]);
  try {
    const first = req([{}]);
    r.d.submit(first);
    r.clock.advance(10_000); // started
    await flush();
    const conflicting = { ...first, event_slots: [{ ...first.event_slots[0], event_quantity: 1 }] };
    const other = req([{ start_time: new Date(T0 + 100_000).toISOString(), end_time: new Date(T0 + 110_000).toISOString() }]);
    const [a, b] = await Promise.allSettled([r.d.submitBatched(conflicting), r.d.submitBatched(other)]);
    assert.equal(a.status, "rejected");
    assert.ok(isSitegateError((a as PromiseRejectedResult).reason, "CONFLICT"));
    assert.deepEqual((b as PromiseFulfilledResult<unknown>).value, [{ event_id: other.event_slots[0].event_id, status: "accepted" }]);
    assert.equal(r.d.list().find((e) => e.spec.event_id === other.event_slots[0].event_id)?.state, "scheduled", "committed");
    assert.equal(
      r.d.list().find((e) => e.spec.event_id === first.event_slots[0].event_id)?.spec.quantity,
      4,
      "the conflicting change stored nothing",
    );
    // Cancel the scheduled one, then a late retry of the original request: still cancelled.
    const cancel = { ...other, event_slots: [{ ...other.event_slots[0], cancelled: true }] };
    assert.deepEqual(await r.d.submitBatched(cancel), [{ event_id: other.event_slots[0].event_id, status: "cancelled" }]);
    assert.deepEqual(await r.d.submitBatched(other), [{ event_id: other.event_slots[0].event_id, status: "cancelled" }]);
    r.clock.advance(120_000);
    await flush();
    assert.equal(r.d.stats.started, 1, "only the first event ever started: the cancelled one was never revived");
    assert.equal(r.d.list().find((e) => e.spec.event_id === other.event_slots[0].event_id)?.state, "cancelled");
  } finally {
    r.cleanup();
  }
});
