// Local schedules across daylight saving, on an injected clock: a wall time in the spring
// gap runs at the first valid instant after it, a wall time in the autumn repeat runs once,
// also across a restart inside the repeated hour. The target stands for the dispatcher's
// event store: it keeps every event id it was given, across restarts.
import { test } from "node:test";
import assert from "node:assert/strict";
import { LocalSchedules, ScheduleClock } from "../../src/dispatch/local-schedules.js";
import type { EventSpec } from "../../src/dispatch/request.js";
import type { Schedule } from "../../src/config/schedule-schema.js";
import { silentLogger } from "../../src/log.js";
import { FakeClock } from "../support/fake-clock.js";

const HOUR = 3_600_000;

function daily(cron = "30 2 * * *", duration_s = 3600): Schedule {
  return { name: "night", cron, timezone: "Europe/Berlin", duration_s, event_type: "charge", event_quantity: 1, event_unit: "kW" };
}

/** Stands for the event store: an id once given is refused again, as is an event already over. */
class Store {
  readonly added: EventSpec[] = [];
  private readonly ids = new Set<string>();
  constructor(private readonly clock: FakeClock) {}
  submitLocal(spec: EventSpec): boolean {
    if (this.ids.has(spec.event_id) || spec.end_ms <= this.clock.now()) return false;
    this.ids.add(spec.event_id);
    this.added.push(spec);
    return true;
  }
  starts(): string[] {
    return this.added.map((s) => new Date(s.start_ms).toISOString());
  }
}

function run(schedule: Schedule, from: string, until: string, store?: Store, clock?: FakeClock): { store: Store; clock: FakeClock } {
  clock ??= new FakeClock(Date.parse(from));
  store ??= new Store(clock);
  const ls = new LocalSchedules([schedule], store, silentLogger(), clock);
  ls.start();
  try {
    clock.advance(Date.parse(until) - clock.now());
  } finally {
    ls.stop();
  }
  return { store, clock };
}

test("spring forward in Europe/Berlin: a daily 02:30 runs at 03:00 local (01:00 UTC), the first valid instant after the gap", () => {
  const { store } = run(daily(), "2026-03-27T22:00:00Z", "2026-03-30T06:00:00Z");
  assert.deepEqual(store.starts(), [
    "2026-03-28T01:30:00.000Z", // 02:30 CET
    "2026-03-29T01:00:00.000Z", // 02:30 does not exist: 03:00 CEST
    "2026-03-30T00:30:00.000Z", // 02:30 CEST
  ]);
  assert.equal(store.added[1].end_ms - store.added[1].start_ms, 3600_000, "its full duration from there");
});

test("spring forward: every wall time in the gap maps to the gap's end, and a schedule outside the gap is untouched", () => {
  const c = new ScheduleClock(daily("*/20 2 * * *"));
  try {
    const gapEnd = Date.parse("2026-03-29T01:00:00Z");
    assert.deepEqual(c.dueIn(gapEnd), [gapEnd], "02:00, 02:20 and 02:40 run once, together, at 03:00");
    assert.deepEqual(c.dueIn(gapEnd - 60_000), []);
  } finally {
    c.destroy();
  }
  const { store } = run(daily("0 3 * * *"), "2026-03-28T22:00:00Z", "2026-03-29T03:00:00Z");
  assert.deepEqual(store.starts(), ["2026-03-29T01:00:00.000Z"]);
});

test("autumn in Europe/Berlin: a daily 02:30 runs once, at the first 02:30 (CEST, 00:30 UTC), not again at 02:30 CET", () => {
  const { store } = run(daily(), "2026-10-24T22:00:00Z", "2026-10-26T06:00:00Z");
  assert.deepEqual(store.starts(), ["2026-10-25T00:30:00.000Z", "2026-10-26T01:30:00.000Z"]);
});

test("autumn: a restart inside the repeated hour runs nothing again, whether the first run's window is still open or over", () => {
  for (const duration_s of [1800, 2 * 3600]) {
    const clock = new FakeClock(Date.parse("2026-10-24T22:00:00Z"));
    const store = new Store(clock);
    // Runs through the first 02:30, then stops at 02:10 CET (01:10 UTC), inside the repeat.
    run(daily("30 2 * * *", duration_s), "", "2026-10-25T01:10:00Z", store, clock);
    assert.deepEqual(store.starts(), ["2026-10-25T00:30:00.000Z"]);
    // Down for 25 min, back at 02:35 CET: just after the repeated 02:30.
    clock.step(25 * 60_000);
    run(daily("30 2 * * *", duration_s), "", "2026-10-25T04:00:00Z", store, clock);
    assert.deepEqual(store.starts(), ["2026-10-25T00:30:00.000Z"], `duration ${duration_s} s`);
  }
});

test("autumn: a daemon down over the first 02:30 and started in the repeat takes up that occurrence only while its window is open", () => {
  const open = run(daily("30 2 * * *", 2 * 3600), "2026-10-25T01:35:00Z", "2026-10-25T04:00:00Z");
  assert.deepEqual(open.store.starts(), ["2026-10-25T00:30:00.000Z"]);
  const over = run(daily("30 2 * * *", 1800), "2026-10-25T01:35:00Z", "2026-10-25T04:00:00Z");
  assert.deepEqual(over.store.starts(), [], "the repeated 02:30 is not a second occurrence");
});

test("a zone without daylight saving and UTC: every day once at the same instant; a 6-field cron keeps its seconds", () => {
  const utc = run({ ...daily(), timezone: "UTC" }, "2026-03-28T00:00:00Z", "2026-03-31T00:00:00Z");
  assert.deepEqual(utc.store.starts(), ["2026-03-28T02:30:00.000Z", "2026-03-29T02:30:00.000Z", "2026-03-30T02:30:00.000Z"]);
  const secs = run({ ...daily("15 30 2 * * *"), timezone: "UTC" }, "2026-03-28T00:00:00Z", "2026-03-28T12:00:00Z");
  assert.deepEqual(secs.store.starts(), ["2026-03-28T02:30:15.000Z"]);
  const tokyo = run({ ...daily(), timezone: "Asia/Tokyo" }, "2026-03-28T00:00:00Z", "2026-03-29T00:00:00Z");
  assert.deepEqual(tokyo.store.starts(), ["2026-03-28T17:30:00.000Z"]);
});

test("the wall clock stepping back an hour (NTP) adds no occurrence twice", () => {
  const clock = new FakeClock(Date.parse("2026-06-01T00:00:00Z"));
  const store = new Store(clock);
  const ls = new LocalSchedules([daily("30 2 * * *", 2 * 3600)], store, silentLogger(), clock);
  ls.start();
  try {
    clock.advance(HOUR); // 01:00 UTC = 03:00 CEST: 02:30 ran at 00:30 UTC
    clock.step(-HOUR);
    clock.advance(2 * HOUR);
    assert.deepEqual(store.starts(), ["2026-06-01T00:30:00.000Z"]);
  } finally {
    ls.stop();
  }
});

test("a weekly Sunday 02:30 on the spring-forward Sunday runs at 03:00; a half-hour shift (Lord Howe) maps its 30-min gap to its end", () => {
  const weekly = run(daily("30 2 * * 0"), "2026-03-21T00:00:00Z", "2026-04-06T00:00:00Z");
  assert.deepEqual(weekly.store.starts(), ["2026-03-22T01:30:00.000Z", "2026-03-29T01:00:00.000Z", "2026-04-05T00:30:00.000Z"]);
  // Lord Howe: +10:30, +11:00 from 02:00 on 4 October 2026 (02:00-02:30 skipped); 02:15 runs at 02:30 (15:30 UTC).
  const lh = run({ ...daily("15 2 * * *"), timezone: "Australia/Lord_Howe" }, "2026-10-02T12:00:00Z", "2026-10-05T00:00:00Z");
  assert.deepEqual(lh.store.starts(), ["2026-10-02T15:45:00.000Z", "2026-10-03T15:30:00.000Z", "2026-10-04T15:15:00.000Z"]);
});
