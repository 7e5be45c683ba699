// Dispatch bounds (DESIGN B4) on the dispatcher with an injected clock: a start more than
// 31 days after receipt and a 10,001st event not yet ended are refused with a 400 that
// names the limit, and nothing of such a request is stored; a database that already holds
// any number of far-future events (as an older version stored them) starts with only the
// scheduler's window in memory, and that window is loaded page by page as it moves.
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { isSitegateError } from "../../src/errors.js";
import { MAX_EVENT_MS, MAX_OPEN_EVENTS, MAX_START_AHEAD_MS, toSpec, contentHash } from "../../src/dispatch/request.js";
import { EventStore, OpenWindow, WINDOW_AHEAD_MS, emptyProgress, type EventRow } from "../../src/dispatch/store.js";
import { Timeline } from "../../src/dispatch/timeline.js";
import { battery } from "../support/fake-devices.js";
import { T0, drRequest, unitRig } from "../support/dispatch-unit.js";

const DAY = 86_400_000;
const iso = (ms: number) => new Date(ms).toISOString();
const slot = (start: number, extra: Record<string, unknown> = {}) => ({ start_time: iso(start), end_time: iso(start + 60_000), ...extra });
const req = (slots: Array<Record<string, unknown>>) => drRequest(slots, { event_type: "discharge", event_quantity: 3 });
const stored = (db: import("../../src/storage/db.js").Db) => db.prepare("SELECT count(*) FROM dp_event").pluck().get() as number;

function refusedFor(limit: RegExp) {
  return (e: unknown) => {
    assert.ok(isSitegateError(e, "INVALID_REQUEST"), String(e));
    assert.match((e as Error).message, limit);
    return true;
  };
}

test("a start more than 31 days after receipt is refused with the limit named, and nothing of the request is stored", () => {
  const r = unitRig([battery("b1", 5000)]);
  try {
    const ok = req([slot(T0 + MAX_START_AHEAD_MS)]);
    assert.equal(r.d.submit(ok)[0].status, "accepted", "exactly 31 days ahead is within the limit");
    const before = stored(r.db);
    const far = req([slot(T0 + DAY), slot(T0 + MAX_START_AHEAD_MS + 1)]);
    assert.throws(() => r.d.submit(far), refusedFor(/31 days after receipt/));
    assert.equal(stored(r.db), before, "the event within the limit was not stored either");
    const year2090 = req([slot(Date.UTC(2090, 0, 1))]);
    assert.throws(
      () => r.d.submit(year2090),
      (e) => {
        assert.ok(isSitegateError(e, "INVALID_REQUEST"));
        assert.equal((e as { details: Array<{ path: string }> }).details[0].path, "event_slots[0].start_time");
        return true;
      },
    );
  } finally {
    r.cleanup();
  }
});

test("an end_time more than 24 h after start_time is refused with the limit named, and nothing of the request is stored", () => {
  const r = unitRig([battery("b1", 5000)]);
  try {
    const day = req([{ start_time: iso(T0 + 60_000), end_time: iso(T0 + 60_000 + MAX_EVENT_MS) }]);
    assert.equal(r.d.submit(day)[0].status, "accepted", "exactly 24 h is within the limit");
    const before = stored(r.db);
    const long = req([slot(T0 + DAY), { start_time: iso(T0 + 60_000), end_time: iso(Date.UTC(2126, 0, 1)) }]);
    assert.throws(
      () => r.d.submit(long),
      (e) => {
        refusedFor(/24 h after start_time/)(e);
        assert.deepEqual((e as { details: unknown[] }).details, [
          { path: "event_slots[1].end_time", message: "must be at most 24 h after start_time" },
        ]);
        return true;
      },
    );
    assert.throws(() => r.d.submit(req([{ start_time: iso(T0 + 60_000), end_time: iso(T0 + 60_001 + MAX_EVENT_MS) }])), refusedFor(/24 h/));
    assert.equal(stored(r.db), before, "the event within the limit was not stored either");
  } finally {
    r.cleanup();
  }
});

test("the 10,001st event not yet ended is refused with the limit named; cancelling one makes room again", () => {
  const r = unitRig([battery("b1", 5000)]);
  try {
    const ids: string[] = [];
    for (let i = 0; i < MAX_OPEN_EVENTS / 100; i++) {
      const rq = req(Array.from({ length: 100 }, (_, j) => slot(T0 + DAY + (i * 100 + j) * 60_000)));
      r.d.submit(rq);
      ids.push(...rq.event_slots.map((e) => e.event_id));
    }
    const before = stored(r.db);
    const more = req([slot(T0 + 2 * DAY)]);
    assert.throws(() => r.d.submit(more), refusedFor(/limit of 10000 per site/));
    assert.equal(stored(r.db), before, "nothing stored");
    const first = req([slot(T0 + DAY, { event_id: ids[0] })]);
    assert.equal(r.d.submit(first)[0].status, "accepted", "an identical repeat adds nothing and is answered");
    const cancel = req([slot(T0 + DAY, { event_id: ids[0], cancelled: true })]);
    assert.equal(r.d.submit(cancel)[0].status, "cancelled");
    assert.equal(r.d.submit(more)[0].status, "accepted", "the cancelled event's place");
  } finally {
    r.cleanup();
  }
});

/** An event row as an older version stored it, straight into the table. */
function legacyRow(start: number, id = randomUUID()): EventRow {
  const spec = toSpec(
    {
      event_id: id,
      start_time: iso(start),
      end_time: iso(start + 60_000),
      event_type: "discharge",
      event_quantity: 3,
      event_unit: "kW",
      priority: 10,
      mandatory: false,
      cancelled: false,
    },
    "live",
  );
  const at = T0 - DAY;
  return {
    spec,
    content_hash: contentHash(spec),
    state: "scheduled",
    receipt: "accepted",
    started_at: null,
    ended_at: null,
    progress: emptyProgress(),
    result: null,
    created_at: at,
    updated_at: at,
  };
}

test("a database an older version filled with 20,000 events from 2090 starts with only the near event in memory; new events are refused over the limit, old ones can be cancelled", async () => {
  const first = unitRig([battery("b1", 5000)]);
  const db = first.db;
  await first.d.stop();
  const store = new EventStore(db);
  const legacy: EventRow[] = [];
  db.transaction(() => {
    for (let i = 0; i < 20_000; i++) {
      const row = legacyRow(Date.UTC(2090, 0, 1) + i * 60_000);
      legacy.push(row);
      store.put(row, null);
    }
    store.put(legacyRow(T0 + 3_600_000), null);
  })();
  const r = unitRig([battery("b1", 5000)], { db });
  try {
    assert.equal(r.d.scheduled(), 1, "only the event within the window is held");
    assert.throws(() => r.d.submit(req([slot(T0 + DAY)])), refusedFor(/limit of 10000/));
    const old = legacy[0].spec;
    const cancel = req([{ event_id: old.event_id, start_time: iso(old.start_ms), end_time: iso(old.end_ms), cancelled: true }]);
    assert.equal(r.d.submit(cancel)[0].status, "cancelled", "an older version's far event can still be cancelled");
    r.clock.advance(3_600_000 + 1000);
    assert.equal(r.d.running(), 1, "the near event runs");
  } finally {
    r.cleanup();
    first.close();
  }
});

test("the window loads at most a bounded page, goes on inside events of one start, and reaches far events only when they come near", async () => {
  const rig = unitRig([]);
  await rig.d.stop();
  const store = new EventStore(rig.db);
  try {
    const same = T0 + DAY;
    const rows = Array.from({ length: 2 * MAX_OPEN_EVENTS + 5 }, () => legacyRow(same));
    const far = legacyRow(T0 + 100 * DAY);
    rig.db.transaction(() => {
      for (const row of [...rows, far]) store.put(row, null);
    })();
    const window = new OpenWindow(store);
    const held = new Timeline();
    assert.equal(window.fill(T0, held), MAX_OPEN_EVENTS, "one page, no more");
    assert.equal(window.fill(T0, held), 0, "no room: nothing more");
    for (const row of held.all()) held.remove(row.spec.event_id); // as if they ran
    assert.equal(window.fill(T0, held), MAX_OPEN_EVENTS, "the next page, within the same start");
    for (const row of held.all()) held.remove(row.spec.event_id);
    assert.equal(window.fill(T0, held), 5);
    const seen = new Set(rows.map((x) => x.spec.event_id));
    assert.equal(seen.size, rows.length);
    assert.equal(held.get(far.spec.event_id), undefined, "100 days ahead is beyond the window");
    assert.ok(!window.holds(far.spec));
    assert.equal(window.fill(T0 + 100 * DAY - WINDOW_AHEAD_MS + 1, held), 1, "loaded once the window reaches it");
    assert.ok(held.get(far.spec.event_id));
  } finally {
    rig.close();
  }
});
