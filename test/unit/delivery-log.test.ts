// The delivery log on a real SQLite database: a message appended once is read by each of
// its consumers on their own cursors and deleted only when all of them have passed it;
// keys are never queued twice; dead letters are per consumer and a retry appends the
// message again with its key; a lane with several in flight moves its cursor only over
// the settled prefix.
import { test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { DELIVERY_MIGRATIONS, DeliveryLog, type Route } from "../../src/delivery/log.js";
import { LogSource } from "../../src/delivery/log-source.js";
import { StoragePart } from "../../src/storage/part.js";
import { silentLogger } from "../../src/log.js";
import { withTmpDir } from "../support/tmp.js";

const HTTPS: Route = { consumer: "https", lane: "execution", address: "https://partner.example/exec" };
const MQTT: Route = { consumer: "mqtt", lane: "events", address: "events" };

async function withLog(fn: (log: DeliveryLog, storage: StoragePart) => void | Promise<void>): Promise<void> {
  await withTmpDir(async (dir) => {
    const storage = new StoragePart(join(dir, "d"), [DELIVERY_MIGRATIONS], silentLogger());
    storage.start();
    try {
      await fn(new DeliveryLog(storage), storage);
    } finally {
      storage.stop();
    }
  });
}

const msg = (key: string, kind = "execution_response") => ({ kind, body: JSON.stringify({ key }), idempotencyKey: key });
const rows = (storage: StoragePart) => storage.db.prepare("SELECT count(*) FROM dl_message").pluck().get() as number;

test("one message, two consumers: each reads it on its own cursor; it is deleted once both have passed it", async () => {
  await withLog((log, storage) => {
    const a = log.append(msg("k-1"), [HTTPS, MQTT]);
    log.append(msg("k-2", "event_state"), [MQTT]);
    assert.deepEqual(
      log.after("https", "execution", 0, 10).map((m) => m.idempotency_key),
      ["k-1"],
    );
    assert.deepEqual(
      log.after("mqtt", "events", 0, 10).map((m) => [m.idempotency_key, m.address]),
      [
        ["k-1", "events"],
        ["k-2", "events"],
      ],
    );
    log.advance("https", "execution", a.id);
    assert.equal(log.size("https"), 0);
    assert.equal(log.size("mqtt"), 2);
    assert.equal(rows(storage), 2, "mqtt has not passed k-1 yet");
    log.advance("mqtt", "events", a.id);
    assert.equal(rows(storage), 1, "k-1 gone once both cursors passed it");
    assert.deepEqual(
      log.pending("mqtt").map((m) => m.idempotency_key),
      ["k-2"],
    );
  });
});

test("a key already queued or dead-lettered is not appended again", async () => {
  await withLog((log) => {
    const first = log.append(msg("k-1"), [HTTPS]);
    assert.equal(log.append(msg("k-1"), [HTTPS, MQTT]).id, first.id);
    assert.equal(log.size("https"), 1);
    assert.equal(log.size("mqtt"), 0);
    log.deadLetter(
      {
        consumer: "https",
        lane: "execution",
        kind: "x",
        address: HTTPS.address,
        body: "{}",
        idempotency_key: "k-dead",
        created_at: new Date().toISOString(),
        attempts: 1,
      },
      "HTTP 400",
    );
    log.append(msg("k-dead"), [HTTPS]);
    assert.equal(log.size("https"), 1, "dead-lettered keys are not queued twice");
  });
});

test("dead letters are per consumer; a retry appends the message again at the end of its lane with its key", async () => {
  await withLog((log) => {
    log.append(msg("k-1"), [HTTPS]);
    const source = new LogSource(log, "https", "execution");
    const item = source.next(new Set())!;
    item.failed("HTTP 400");
    assert.equal(log.pending("https")[0].attempts, 1);
    assert.equal(log.pending("https")[0].last_error, "HTTP 400");
    item.deadLetter("HTTP 400", 2);
    assert.equal(log.size("https"), 0);
    assert.equal(log.deadCount("https"), 1);
    assert.equal(log.deadCount("mqtt"), 0);
    log.append(msg("k-2"), [HTTPS]);
    const [dead] = log.deadLetters("https");
    assert.equal(dead.attempts, 2);
    assert.equal(log.retry("https", [dead.id]), 1);
    assert.deepEqual(
      log.pending("https").map((m) => m.idempotency_key),
      ["k-2", "k-1"],
      "at the end of its lane",
    );
    assert.equal(log.deadCount("https"), 0);
  });
});

test("several in flight: the cursor moves only over the settled prefix, and a new source starts there", async () => {
  await withLog((log) => {
    for (const k of ["k-1", "k-2", "k-3"]) log.append(msg(k, "event_state"), [MQTT]);
    const source = new LogSource(log, "mqtt", "events");
    const busy = new Set<string>();
    const items = [1, 2, 3].map(() => {
      const i = source.next(busy)!;
      busy.add(i.ref);
      return i;
    });
    assert.equal(source.next(busy), undefined);
    items[1].settle();
    items[2].settle();
    assert.equal(log.cursor("mqtt", "events").through, 0, "k-1 is still in flight");
    assert.deepEqual(new LogSource(log, "mqtt", "events").next(new Set())?.key, "k-1", "a restart sends k-1 again first");
    items[0].settle();
    assert.equal(log.cursor("mqtt", "events").through, items[2].describe.message);
    assert.equal(log.size("mqtt"), 0);
  });
});

test("a lane found empty is asked again at once after an append here, and after recheckMs for another process's", async () => {
  await withLog(async (log, storage) => {
    const source = new LogSource(log, "https", "execution", 300);
    assert.equal(source.next(new Set()), undefined);
    // Another process (sitegate outbox retry) writes the tables; this process's appends are not bumped.
    const id = storage.db
      .prepare("INSERT INTO dl_message (kind, body, idempotency_key, created_at) VALUES ('execution_response', '{}', 'k-other', ?)")
      .run(new Date().toISOString()).lastInsertRowid;
    storage.db
      .prepare("INSERT INTO dl_route (consumer, lane, message_id, address) VALUES ('https', 'execution', ?, 'https://p/x')")
      .run(id);
    assert.equal(source.next(new Set()), undefined, "taken as empty until the re-check");
    await new Promise((r) => setTimeout(r, 350));
    assert.equal(source.next(new Set())?.key, "k-other", "seen at the re-check");
    assert.equal(source.next(new Set(["m" + String(id)])), undefined);
    log.append(msg("k-here"), [HTTPS]);
    assert.equal(source.next(new Set(["m" + String(id)]))?.key, "k-here", "an append in this process is seen at once");
  });
});
