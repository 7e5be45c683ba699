// Event history across restarts, on the dispatcher's injected clock (FakeClock; nothing
// waits for real time): an event that ended while the gateway was down is `missed`, and
// cancelling it afterwards is 409; finished events older than 30 days are swept at start,
// newer ones stay. The real daemon over HTTPS and its SQLite file.
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { startGateway, type Gateway } from "../support/gateway.js";
import { withTmpDir } from "../support/tmp.js";
import { readDb } from "../support/db.js";
import { FakeClock } from "../support/fake-clock.js";

const DR = "/v1/api/gateway/site-001/dr";
const MIN = 60_000;
const DAY = 86_400_000;

function slot(startMs: number, endMs: number, over: Record<string, unknown> = {}) {
  return {
    event_id: randomUUID(),
    start_time: new Date(startMs).toISOString(),
    end_time: new Date(endMs).toISOString(),
    event_type: "discharge",
    event_quantity: 1,
    event_unit: "kW",
    priority: 10,
    mandatory: false,
    cancelled: false,
    ...over,
  };
}

const dr = (gw: Gateway, slots: unknown[]) =>
  gw.call("POST", DR, { body: { mode: "live", event_slots: slots }, headers: gw.apiKeyHeaders });
const states = (dir: string) =>
  readDb(dir, (db) =>
    Object.fromEntries(
      (db.prepare("SELECT event_id, state FROM dp_event").all() as Array<{ event_id: string; state: string }>).map((r) => [
        r.event_id,
        r.state,
      ]),
    ),
  );

/** A gateway whose dispatcher (and token clock) runs on `clock`. */
const gatewayAt = (dir: string, clock: FakeClock) => startGateway(dir, {}, { clock, now: () => clock.now() });

test("cancelling an event that already ended (missed while the gateway was down) is 409 and changes nothing", async () => {
  await withTmpDir(async (dir) => {
    const t0 = Date.now();
    let gw = await gatewayAt(dir, new FakeClock(t0));
    const ev = slot(t0 + 10 * MIN, t0 + 20 * MIN);
    try {
      const r = await dr(gw, [ev]);
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(r.json, [{ event_id: ev.event_id, status: "accepted" }]);
    } finally {
      await gw.stop();
    }
    // Back an hour later: the event's window passed while nothing ran.
    gw = await gatewayAt(dir, new FakeClock(t0 + 60 * MIN));
    try {
      assert.equal(states(dir)[ev.event_id], "missed");
      const cancel = await dr(gw, [{ ...ev, cancelled: true }]);
      assert.equal(cancel.status, 409, cancel.text);
      assert.equal(cancel.json.error, "conflict");
      assert.match(cancel.json.message, /already ended \(missed\)/);
      assert.deepEqual(cancel.json.details, [{ path: "event_slots[0].cancelled", message: "event already missed" }]);
      assert.equal(states(dir)[ev.event_id], "missed", "the refused cancel changed nothing");
    } finally {
      await gw.stop();
    }
  });
});

test("finished events are kept 30 days after their end and swept at the next start after that", async () => {
  await withTmpDir(async (dir) => {
    const t0 = Date.now();
    let gw = await gatewayAt(dir, new FakeClock(t0));
    // Both cancelled at once (a finished state): one ends in an hour, one in two days.
    const soon = slot(t0 + 30 * MIN, t0 + 60 * MIN);
    const later = slot(t0 + 2 * DAY - 30 * MIN, t0 + 2 * DAY);
    const open = slot(t0 + 31 * DAY - 60 * MIN, t0 + 31 * DAY); // within the 31-day bound, still open 30 days on
    try {
      assert.equal((await dr(gw, [soon, later, open])).status, 200);
      assert.equal(
        (
          await dr(gw, [
            { ...soon, cancelled: true },
            { ...later, cancelled: true },
          ])
        ).status,
        200,
      );
      assert.deepEqual(states(dir), { [soon.event_id]: "cancelled", [later.event_id]: "cancelled", [open.event_id]: "scheduled" });
    } finally {
      await gw.stop();
    }
    // 30 days and 2 hours on: `soon` ended over 30 days ago, `later` 28 days ago.
    gw = await gatewayAt(dir, new FakeClock(t0 + 30 * DAY + 2 * 60 * MIN));
    try {
      assert.deepEqual(
        states(dir),
        { [later.event_id]: "cancelled", [open.event_id]: "scheduled" },
        "only the event that ended over 30 days ago is gone",
      );
    } finally {
      await gw.stop();
    }
  });
});
