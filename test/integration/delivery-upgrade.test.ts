// An upgrade from the release whose HTTPS and MQTT messages waited in tables of their own
// (ul_outbox, ul_dead_letter, fl_outbox): a database written with that release's schema,
// literally, holding undelivered messages for both transports and a dead letter. The new
// daemon moves them into the delivery log at start, and a real HTTPS partner sink and a
// real mosquitto receive every one exactly once, in order, with its Idempotency-Key;
// the dead letter is kept and sends once when retried, and a restart sends nothing again.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { DB_FILE } from "../../src/storage/db.js";
import type { Uplink } from "../../src/uplink/uplink.js";
import { startSink, type PartnerSink, partnerTo } from "../support/partner-sink.js";
import { startGateway } from "../support/gateway.js";
import { fleetClient, fleetConfig, record, withBroker, type Received } from "../support/mosquitto.js";
import { withTmpDir } from "../support/tmp.js";
import { until } from "../support/wait.js";
import { HTTPS } from "../../src/uplink/callbacks.js";

/** The previous release's tables of these two modules, as its migrations created them. */
const PREVIOUS_SCHEMA = `
  CREATE TABLE IF NOT EXISTS schema_migrations (module TEXT NOT NULL, version INTEGER NOT NULL, applied_at TEXT NOT NULL, PRIMARY KEY (module, version)) WITHOUT ROWID;
  CREATE TABLE ul_outbox (id INTEGER PRIMARY KEY, kind TEXT NOT NULL, url TEXT NOT NULL, body TEXT NOT NULL, idempotency_key TEXT NOT NULL,
    created_at TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, last_error TEXT);
  CREATE TABLE ul_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
  ALTER TABLE ul_outbox ADD COLUMN lane TEXT NOT NULL DEFAULT 'outbox';
  CREATE INDEX ul_outbox_lane ON ul_outbox (lane, id);
  CREATE UNIQUE INDEX ul_outbox_key ON ul_outbox (idempotency_key);
  CREATE TABLE ul_dead_letter (id INTEGER PRIMARY KEY AUTOINCREMENT, lane TEXT NOT NULL, kind TEXT NOT NULL, url TEXT NOT NULL, body TEXT NOT NULL,
    idempotency_key TEXT NOT NULL UNIQUE, created_at TEXT NOT NULL, dead_at TEXT NOT NULL, attempts INTEGER NOT NULL, last_error TEXT);
  CREATE TABLE fl_outbox (id INTEGER PRIMARY KEY AUTOINCREMENT, topic TEXT NOT NULL, kind TEXT NOT NULL, body TEXT NOT NULL,
    idempotency_key TEXT NOT NULL, created_at TEXT NOT NULL);
  CREATE TABLE fl_state (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
  INSERT INTO fl_state (key, value) VALUES ('telemetry_cursor', 0);
  CREATE TABLE fl_nonce (nonce TEXT PRIMARY KEY, expires_at INTEGER NOT NULL) WITHOUT ROWID;
  CREATE INDEX fl_nonce_expiry ON fl_nonce (expires_at);
  INSERT INTO schema_migrations VALUES ('uplink', 1, '2026-11-01T00:00:00Z'), ('uplink', 2, '2026-11-01T00:00:00Z'),
    ('fleet', 1, '2026-11-01T00:00:00Z'), ('fleet', 2, '2026-11-01T00:00:00Z');
`;

const at = (min: number) => new Date(Date.UTC(2026, 10, 20, 12, min)).toISOString();

/** Writes sitegate.db as the previous release left it: messages waiting for both transports. */
function writePreviousRelease(dataDir: string, sinkUrl: string): void {
  mkdirSync(dataDir, { recursive: true });
  const db = new Database(join(dataDir, DB_FILE));
  try {
    db.pragma("journal_mode = WAL");
    db.exec(PREVIOUS_SCHEMA);
    db.prepare("INSERT INTO ul_meta (key, value) VALUES ('instance_id', ?)").run("6f1c2d3e-0000-4000-8000-000000000001");
    const ul = db.prepare(
      "INSERT INTO ul_outbox (lane, kind, url, body, idempotency_key, created_at, attempts, last_error) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
    );
    ul.run(
      "execution",
      "execution_response",
      `${sinkUrl}/exec`,
      '{"event_id":"e-1","status":"completed"}',
      "exec-e-1",
      at(1),
      3,
      "HTTP 503",
    );
    ul.run("device_report", "device_report", `${sinkUrl}/report`, '{"report":1}', "report-1", at(2), 0, null);
    ul.run("execution", "execution_response", `${sinkUrl}/exec`, '{"event_id":"e-2","status":"failed"}', "exec-e-2", at(3), 0, null);
    db.prepare(
      "INSERT INTO ul_dead_letter (lane, kind, url, body, idempotency_key, created_at, dead_at, attempts, last_error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
    ).run(
      "execution",
      "execution_response",
      `${sinkUrl}/exec`,
      '{"event_id":"e-0","status":"partial"}',
      "exec-e-0",
      at(0),
      at(0),
      40,
      "HTTP 400",
    );
    const fl = db.prepare("INSERT INTO fl_outbox (topic, kind, body, idempotency_key, created_at) VALUES ('events', ?, ?, ?, ?)");
    fl.run("event_state", '{"event_id":"e-1","state":"done"}', "state-e-1-done", at(1));
    fl.run("execution_response", '{"event_id":"e-1","status":"completed"}', "exec-e-1", at(1));
    fl.run("event_state", '{"event_id":"e-2","state":"done"}', "state-e-2-done", at(3));
    fl.run("execution_response", '{"event_id":"e-2","status":"failed"}', "exec-e-2", at(3));
  } finally {
    db.close();
  }
}

const httpsKeys = (sink: PartnerSink, path: string) => sink.accepted(path).map((r) => r.headers["idempotency-key"] as string);
const mqttKeys = (got: Received[]) => got.filter((m) => m.topic === "sitegate/site-001/events").map((m) => m.key);
const settle = () => new Promise((r) => setTimeout(r, 2500)); // past an idle lane's re-check of the log

test("an upgrade keeps every undelivered HTTPS and MQTT message and delivers each once", async () => {
  const sink = await startSink();
  try {
    await withTmpDir((dir) =>
      withBroker(dir, async (broker) => {
        const dataDir = join(dir, "gw");
        writePreviousRelease(dataDir, sink.url);
        const cl = await fleetClient(broker);
        const got = record(cl);
        await cl.subscribeAsync("sitegate/site-001/events", { qos: 1 });
        const over = {
          partner: partnerTo(sink, { headers: [] }),
          fleet: fleetConfig(broker),
        };
        let gw = await startGateway(dataDir, over);
        try {
          await until(() => httpsKeys(sink, "/exec").length >= 2 && httpsKeys(sink, "/report").length >= 1, "the HTTPS messages delivered");
          await until(() => mqttKeys(got).length >= 4, "the MQTT messages delivered");
          await settle();
          assert.deepEqual(httpsKeys(sink, "/exec"), ["exec-e-1", "exec-e-2"], "execution responses once each, oldest first, keys kept");
          assert.deepEqual(httpsKeys(sink, "/report"), ["report-1"]);
          assert.deepEqual(
            sink.accepted("/exec").map((r) => r.body.event_id),
            ["e-1", "e-2"],
          );
          assert.deepEqual(
            mqttKeys(got),
            ["state-e-1-done", "exec-e-1", "state-e-2-done", "exec-e-2"],
            "the fleet's events once each, in their order",
          );
          assert.deepEqual(
            got.filter((m) => m.topic.endsWith("/events")).map((m) => m.props?.userProperties?.kind),
            ["event_state", "execution_response", "event_state", "execution_response"],
          );

          // The dead letter came along: listed with its key, sent once when retried.
          const messages = gw.daemon.part<Uplink>("uplink").deliveryLog;
          const [dead] = messages.deadLetters(HTTPS);
          assert.equal(dead.idempotency_key, "exec-e-0");
          assert.equal(dead.attempts, 40);
          assert.equal(messages.retry(HTTPS, [dead.id]), 1);
          await until(() => httpsKeys(sink, "/exec").includes("exec-e-0"), "the retried dead letter");
          await settle();
          assert.deepEqual(httpsKeys(sink, "/exec"), ["exec-e-1", "exec-e-2", "exec-e-0"]);
          assert.equal(messages.size(HTTPS), 0);
          const tables = gw.daemon.storage.db
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('ul_outbox', 'ul_dead_letter', 'fl_outbox')")
            .pluck()
            .all();
          assert.deepEqual(tables, [], "the old tables are gone");

          // A restart sends nothing again.
          await gw.stop();
          gw = await startGateway(dataDir, over);
          await settle();
          assert.deepEqual(httpsKeys(sink, "/exec"), ["exec-e-1", "exec-e-2", "exec-e-0"]);
          assert.deepEqual(httpsKeys(sink, "/report"), ["report-1"]);
          assert.equal(mqttKeys(got).length, 4);
        } finally {
          await cl.endAsync();
          await gw.stop();
        }
      }),
    );
  } finally {
    await sink.stop();
  }
});
