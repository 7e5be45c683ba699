// The fleet's tables (module `fleet`): fl_nonce, the nonces of signed commands (nonces.ts);
// fl_state, where an earlier release kept the telemetry cursor (telemetry-cursor.ts reads
// it once); fl_outbox, an earlier release's queue, whose rows migration 3 moves into the
// delivery log (consumer mqtt) before it drops the table.
import { migrate, type Db, type ModuleMigrations } from "../storage/db.js";
import { DELIVERY_MIGRATIONS, DeliveryLog } from "../delivery/log.js";
import { mqttRoute } from "./mqtt-sink.js";

export const FLEET_MIGRATIONS: ModuleMigrations = {
  module: "fleet",
  migrations: [
    {
      version: 1,
      sql: `
        -- AUTOINCREMENT: ids are the send order and are never reused after a settle.
        CREATE TABLE fl_outbox (
          id INTEGER PRIMARY KEY AUTOINCREMENT,
          topic TEXT NOT NULL,
          kind TEXT NOT NULL,
          body TEXT NOT NULL,
          idempotency_key TEXT NOT NULL,
          created_at TEXT NOT NULL
        );
        CREATE TABLE fl_state (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
        INSERT INTO fl_state (key, value) VALUES ('telemetry_cursor', 0);
      `,
    },
    {
      version: 2,
      sql: `
        -- Nonces of signed commands, kept until the command would be too old anyway.
        CREATE TABLE fl_nonce (nonce TEXT PRIMARY KEY, expires_at INTEGER NOT NULL) WITHOUT ROWID;
        CREATE INDEX fl_nonce_expiry ON fl_nonce (expires_at);
      `,
    },
    // fl_outbox's rows move into the delivery log (consumer mqtt), keys and order kept.
    { version: 3, sql: (db) => moveIntoLog(db) },
  ],
};

function moveIntoLog(db: Db): void {
  migrate(db, [DELIVERY_MIGRATIONS]);
  const log = new DeliveryLog({ db });
  const rows = db.prepare("SELECT topic, kind, body, idempotency_key, created_at FROM fl_outbox ORDER BY id").all() as Array<{
    topic: string;
    kind: string;
    body: string;
    idempotency_key: string;
    created_at: string;
  }>;
  for (const m of rows)
    log.appendMoved({ kind: m.kind, body: m.body, idempotencyKey: m.idempotency_key, createdAt: m.created_at }, [mqttRoute(m.topic)]);
  db.exec("DROP TABLE fl_outbox");
}
