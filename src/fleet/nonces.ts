// The fleet uplink's own durable state: the nonces of signed commands. Its messages
// (execution responses, event states) wait in the delivery log (consumer mqtt); migration 3
// moves the rows of fl_outbox (migration 1, an earlier release's table) there. Telemetry is
// read from the sample store (written once) as a consumer of its own, so HTTPS and MQTT
// progress independently and the store keeps rows until both have them; that cursor starts
// at fl_state's telemetry_cursor (where an earlier release kept it).
import { migrate, type Db, type ModuleMigrations } from "../storage/db.js";
import type { StoragePart } from "../storage/part.js";
import { commitDurably } from "../storage/durable.js";
import { DELIVERY_MIGRATIONS, DeliveryLog } from "../delivery/log.js";
import type { SampleStore, TelemetryCursor } from "../telemetry/sample-store.js";
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

/** Unexpired nonces kept at most: 10,000 in 300 s is 33 signed commands a second. */
export const MAX_NONCES = 10_000;

/** The nonces of signed commands: a replay, even after a restart, finds its nonce here. */
export class NonceStore {
  private stmts: ReturnType<NonceStore["prepare"]> | null = null;

  /** Lazy: prepared on first use, after storage has started. */
  constructor(private readonly storage: StoragePart) {}

  private prepare(db: Db) {
    return {
      pruneNonces: db.prepare("DELETE FROM fl_nonce WHERE expires_at < ?"),
      countNonces: db.prepare("SELECT count(*) FROM fl_nonce").pluck(),
      addNonce: db.prepare("INSERT OR IGNORE INTO fl_nonce (nonce, expires_at) VALUES (?, ?)"),
    };
  }

  private get s() {
    this.stmts ??= this.prepare(this.storage.db);
    return this.stmts;
  }

  /**
   * Records a signed command's nonce, committed before the command runs. "replayed" when
   * it was seen before; "full" when MAX_NONCES unexpired nonces are kept (bounded table).
   * Throws if SQLite cannot commit (the command must not run then either).
   */
  claimNonce(nonce: string, expiresAt: number, now: number): "ok" | "replayed" | "full" {
    const s = this.s;
    return commitDurably(this.storage.db, () => {
      s.pruneNonces.run(now);
      if ((s.countNonces.get() as number) >= MAX_NONCES) return "full";
      return s.addNonce.run(nonce, expiresAt).changes === 1 ? "ok" : "replayed";
    });
  }

  /** Forgets prepared statements (the database was closed). */
  reset(): void {
    this.stmts = null;
  }
}

/**
 * The fleet's consumer of the sample store; registered with the composition, before any row
 * could go. Where the store has no cursor of it yet, it starts at fl_state's telemetry_cursor.
 */
export function telemetryConsumer(samples: SampleStore, storage: StoragePart): TelemetryCursor {
  const initial = () => storage.db.prepare("SELECT value FROM fl_state WHERE key = 'telemetry_cursor'").pluck().get() as number;
  return samples.consumer("fleet_telemetry", { initial });
}
