// The fleet uplink's own durable state: an outbox for messages that exist only once
// (execution responses teed from dispatch, committed in dispatch's own transaction) and
// the MQTT telemetry cursor. Telemetry itself is read from the sample store (written
// once); this cursor is separate from the HTTPS push cursor so the two uplinks progress
// independently, and the sample store keeps rows until both have them (SampleStore.hold).
import type { Db, ModuleMigrations } from "../storage/db.js";
import type { StoragePart } from "../storage/part.js";

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
  ],
};

/** Unexpired nonces kept at most: 10,000 in 300 s is 33 signed commands a second. */
export const MAX_NONCES = 10_000;

export interface FleetMessage {
  id: number;
  /** Topic below {prefix}/{site_id}/, e.g. "events". */
  topic: string;
  kind: string;
  body: string;
  idempotency_key: string;
}

export class FleetQueue {
  private stmts: ReturnType<FleetQueue["prepare"]> | null = null;
  private persistedCursor: number | null = null;
  private readonly listeners = new Set<() => void>();

  /** Lazy: dispatch may commit an execution response before the fleet part has started. */
  constructor(private readonly storage: StoragePart) {}

  private prepare(db: Db) {
    return {
      insert: db.prepare("INSERT INTO fl_outbox (topic, kind, body, idempotency_key, created_at) VALUES (?, ?, ?, ?, ?)"),
      after: db.prepare("SELECT id, topic, kind, body, idempotency_key FROM fl_outbox WHERE id > ? ORDER BY id LIMIT ?"),
      removeThrough: db.prepare("DELETE FROM fl_outbox WHERE id <= ?"),
      count: db.prepare("SELECT count(*) FROM fl_outbox").pluck(),
      getState: db.prepare("SELECT value FROM fl_state WHERE key = ?").pluck(),
      setState: db.prepare("UPDATE fl_state SET value = ? WHERE key = ?"),
      pruneNonces: db.prepare("DELETE FROM fl_nonce WHERE expires_at < ?"),
      countNonces: db.prepare("SELECT count(*) FROM fl_nonce").pluck(),
      addNonce: db.prepare("INSERT OR IGNORE INTO fl_nonce (nonce, expires_at) VALUES (?, ?)"),
    };
  }

  private get s() {
    this.stmts ??= this.prepare(this.storage.db);
    return this.stmts;
  }

  /** Commits one message (inside the caller's transaction, if any). Throws if SQLite cannot commit. */
  enqueue(topic: string, kind: string, body: unknown, idempotencyKey: string): number {
    const r = this.s.insert.run(topic, kind, JSON.stringify(body), idempotencyKey, new Date().toISOString());
    // Listeners run after the caller's transaction; a wake-up before the commit only finds nothing new.
    queueMicrotask(() => {
      for (const l of this.listeners) l();
    });
    return Number(r.lastInsertRowid);
  }

  after(id: number, limit: number): FleetMessage[] {
    return this.s.after.all(id, limit) as FleetMessage[];
  }

  /** The broker has every message through `id`. */
  settleThrough(id: number): void {
    this.s.removeThrough.run(id);
  }

  size(): number {
    return this.s.count.get() as number;
  }

  onEnqueue(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The last snapshot id the broker acknowledged, as persisted (what survives a crash). */
  telemetryCursor(): number {
    this.persistedCursor ??= this.s.getState.get("telemetry_cursor") as number;
    return this.persistedCursor;
  }

  saveTelemetryCursor(id: number): void {
    if (id === this.persistedCursor) return;
    this.s.setState.run(id, "telemetry_cursor");
    this.persistedCursor = id;
  }

  /**
   * Records a signed command's nonce, committed before the command runs. "replayed" when
   * it was seen before; "full" when MAX_NONCES unexpired nonces are kept (bounded table).
   * Throws if SQLite cannot commit (the command must not run then either).
   */
  claimNonce(nonce: string, expiresAt: number, now: number): "ok" | "replayed" | "full" {
    const s = this.s;
    return this.storage.db.transaction(() => {
      s.pruneNonces.run(now);
      if ((s.countNonces.get() as number) >= MAX_NONCES) return "full";
      return s.addNonce.run(nonce, expiresAt).changes === 1 ? "ok" : "replayed";
    }).immediate();
  }

  /** Forgets prepared statements (the database was closed). */
  reset(): void {
    this.stmts = null;
    this.persistedCursor = null;
  }
}
