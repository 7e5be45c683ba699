// The maintenance timers (util/utc-schedule.ts) on an injected clock: occurrences at UTC
// wall times, once per occurrence, across wall-clock steps, and nothing after stop().
import { test } from "node:test";
import assert from "node:assert/strict";
import { dailyInZone, dailyLocal, dailyUtc, everyMinutes, nextOccurrence, UtcJob } from "../../src/util/utc-schedule.js";
import { FakeClock } from "../support/fake-clock.js";
import { maintenanceSchedule, SCHEDULE } from "../../src/maintenance.js";

const at = (iso: string) => Date.parse(iso);

test("the next occurrence is the first UTC time strictly after now", () => {
  const d = dailyUtc("03:30");
  assert.equal(nextOccurrence(d, at("2026-11-23T01:00:00Z")), at("2026-11-23T03:30:00Z"));
  assert.equal(nextOccurrence(d, at("2026-11-23T03:30:00Z")), at("2026-11-24T03:30:00Z"));
  assert.equal(nextOccurrence(d, at("2026-11-23T23:59:59Z")), at("2026-11-24T03:30:00Z"));
  assert.equal(nextOccurrence(everyMinutes(10), at("2026-11-23T10:07:12Z")), at("2026-11-23T10:10:00Z"));
  assert.throws(() => dailyUtc("24:00"), /not a time of day/);
  assert.throws(() => everyMinutes(7), /does not divide a day/);
  assert.deepEqual(Object.fromEntries(Object.entries(SCHEDULE).map(([k, r]) => [k, r.text])), {
    checkpoint: "daily 03:30 UTC",
    retention: "every 60 min",
    certificate: "daily 06:00 UTC",
  });
});

test("a daily job runs at its wall time, once a day, and a 10-minute job six times an hour", () => {
  const clock = new FakeClock(at("2026-11-23T00:00:05Z"));
  const daily: number[] = [];
  const often: number[] = [];
  const a = new UtcJob(dailyUtc("03:30"), () => daily.push(clock.now()), clock);
  const b = new UtcJob(everyMinutes(10), () => often.push(clock.now()), clock);
  a.start();
  b.start();
  clock.advance(60 * 60_000);
  assert.equal(often.length, 6);
  assert.equal(often[0], at("2026-11-23T00:10:00Z"));
  clock.advance(47 * 3600_000);
  assert.deepEqual(daily, [at("2026-11-23T03:30:00Z"), at("2026-11-24T03:30:00Z")]);
  assert.equal(a.next, at("2026-11-25T03:30:00Z"));
  a.stop();
  b.stop();
  const n = often.length;
  clock.advance(3 * 86_400_000);
  assert.equal(daily.length, 2, "nothing runs after stop()");
  assert.equal(often.length, n);
  assert.equal(clock.pending, 0);
});

test("a wall-clock step forward over an occurrence runs the job once, within 10 min; a step back re-aims", () => {
  const clock = new FakeClock(at("2026-11-23T01:00:00Z"));
  const runs: number[] = [];
  const job = new UtcJob(dailyUtc("03:30"), () => runs.push(clock.now()), clock);
  job.start();
  clock.step(3 * 86_400_000); // NTP after a boot without an RTC: three days later
  clock.advance(10 * 60_000);
  assert.equal(runs.length, 1, "three missed occurrences run once");
  assert.equal(new Date(runs[0]).toISOString(), "2026-11-26T01:10:00.000Z");
  assert.equal(new Date(job.next).toISOString(), "2026-11-26T03:30:00.000Z");
  clock.step(-5 * 86_400_000); // and back by five days
  clock.advance(10 * 60_000);
  assert.equal(new Date(clock.now()).toISOString(), "2026-11-21T01:20:00.000Z");
  assert.equal(new Date(job.next).toISOString(), "2026-11-21T03:30:00.000Z", "re-aimed at the next 03:30 from the new time");
  clock.advance(3 * 3600_000);
  assert.equal(runs.length, 2);
  assert.equal(new Date(runs[1]).toISOString(), "2026-11-21T03:30:00.000Z");
  job.stop();
});

test("maintenance at a local wall time follows the zone and its daylight saving", () => {
  const saved = process.env.TZ;
  process.env.TZ = "Australia/Sydney";
  try {
    const r = dailyLocal("03:30");
    // AEDT (UTC+11) in November: 03:30 Sydney is 16:30 UTC the day before
    assert.equal(nextOccurrence(r, at("2026-11-23T10:00:00Z")), at("2026-11-23T16:30:00Z"));
    assert.equal(nextOccurrence(r, at("2026-11-23T16:30:00Z")), at("2026-11-24T16:30:00Z"), "strictly after now");
    // AEST (UTC+10) in June
    assert.equal(nextOccurrence(r, at("2026-06-10T00:00:00Z")), at("2026-06-10T17:30:00Z"));
    // 2026-10-04 02:00 -> 03:00 (spring forward): 02:30 does not exist and runs at the end of the gap, 03:00 AEDT, once
    assert.equal(nextOccurrence(dailyLocal("02:30"), at("2026-10-03T12:00:00Z")), at("2026-10-03T16:00:00Z"));
    assert.equal(nextOccurrence(dailyLocal("02:30"), at("2026-10-03T16:00:00Z")), at("2026-10-04T15:30:00Z"));
    assert.match(r.text, /daily 03:30 local time \(Australia\/Sydney\)/);
    // a job on the fake clock runs at those instants
    const clock = new FakeClock(at("2026-11-23T10:00:00Z"));
    const runs: number[] = [];
    const job = new UtcJob(r, () => runs.push(clock.now()), clock);
    job.start();
    clock.advance(2 * 86_400_000);
    job.stop();
    assert.deepEqual(
      runs.map((t) => new Date(t).toISOString()),
      ["2026-11-23T16:30:00.000Z", "2026-11-24T16:30:00.000Z"],
    );
  } finally {
    if (saved === undefined) delete process.env.TZ;
    else process.env.TZ = saved;
  }
});

test("the maintenance config: HH:MM and local, UTC or a zone that exists", () => {
  assert.match(maintenanceSchedule({ at: "04:15", timezone: "UTC" }).checkpoint.text, /^daily 04:15 UTC$/);
  assert.match(maintenanceSchedule({ at: "04:15", timezone: "local" }).checkpoint.text, /^daily 04:15 local time/);
  assert.throws(
    () => maintenanceSchedule({ at: "04:15", timezone: "Mars/Olympus_Mons" }),
    /maintenance\.timezone Mars\/Olympus_Mons: not an IANA time zone/,
  );
  assert.throws(() => dailyLocal("25:00"), /not a time of day/);
});

/** Runs `fn` with process.env behind a trap that records every write of TZ. */
function tzWrites(fn: () => void): string[] {
  const real = process.env;
  const writes: string[] = [];
  const record = (k: string | symbol) => k === "TZ" && writes.push("TZ");
  process.env = new Proxy(real, {
    set: (t, k, v) => (record(k), Reflect.set(t, k, v)),
    defineProperty: (t, k, d) => (record(k), Reflect.defineProperty(t, k, d)),
    deleteProperty: (t, k) => (record(k), Reflect.deleteProperty(t, k)),
  });
  try {
    fn();
  } finally {
    process.env = real;
  }
  return writes;
}

test("maintenance in a named zone runs at its wall time across daylight saving, without touching process.env.TZ", () => {
  const tzBefore = process.env.TZ;
  const runs: string[] = [];
  const writes = tzWrites(() => {
    const schedule = maintenanceSchedule({ at: "02:30", timezone: "Europe/Berlin" });
    assert.equal(schedule.checkpoint.text, "daily 02:30 Europe/Berlin");
    // Berlin: 2026-03-29 02:00 CET -> 03:00 CEST, 2026-10-25 03:00 CEST -> 02:00 CET
    for (const [from, days] of [
      ["2026-03-27T12:00:00Z", 4],
      ["2026-10-23T12:00:00Z", 4],
    ] as const) {
      const clock = new FakeClock(at(from));
      const job = new UtcJob(schedule.checkpoint, () => runs.push(new Date(clock.now()).toISOString()), clock);
      job.start();
      clock.advance(days * 86_400_000);
      job.stop();
    }
  });
  assert.deepEqual(writes, [], "process.env.TZ is never written");
  assert.equal(process.env.TZ, tzBefore);
  assert.deepEqual(runs, [
    "2026-03-28T01:30:00.000Z", // 02:30 CET
    "2026-03-29T01:00:00.000Z", // 02:30 is skipped: the end of the gap, 03:00 CEST
    "2026-03-30T00:30:00.000Z", // 02:30 CEST
    "2026-03-31T00:30:00.000Z",
    "2026-10-24T00:30:00.000Z", // 02:30 CEST
    "2026-10-25T00:30:00.000Z", // 02:30 is repeated: the first, CEST, only (not 01:30Z, CET)
    "2026-10-26T01:30:00.000Z", // 02:30 CET
    "2026-10-27T01:30:00.000Z",
  ]);
  // A zone east of UTC whose wall date is ahead: Auckland at 01:00 NZDT is 12:00Z the day before.
  assert.equal(nextOccurrence(dailyInZone("01:00", "Pacific/Auckland"), at("2026-11-23T11:00:00Z")), at("2026-11-23T12:00:00Z"));
  assert.equal(nextOccurrence(dailyInZone("01:00", "Pacific/Auckland"), at("2026-11-23T12:00:00Z")), at("2026-11-24T12:00:00Z"));
});
