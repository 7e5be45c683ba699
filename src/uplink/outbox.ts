// The durable outbox for callbacks that are messages in their own right (execution
// responses; any future kind): committed before the first send, removed only when the
// partner answered 200. Data pushes come from the sample store instead (data-push.ts),
// so that every sample is written once, not twice.
import type { Db, ModuleMigrations } from "../storage/db.js";
import { newKey } from "./idempotency.js";

export const OUTBOX_MIGRATIONS: ModuleMigrations = {
  module: "uplink",
  migrations: [
    {
      version: 1,
      sql: `
        CREATE TABLE ul_outbox (
          id INTEGER PRIMARY KEY,
          kind TEXT NOT NULL,
          url TEXT NOT NULL,
          body TEXT NOT NULL,
          idempotency_key TEXT NOT NULL,
          created_at TEXT NOT NULL,
          attempts INTEGER NOT NULL DEFAULT 0,
          last_error TEXT
        );
        CREATE TABLE ul_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
      `,
    },
  ],
};

export interface OutboxMessage {
  id: number;
  kind: string;
  url: string;
  body: string;
  idempotency_key: string;
  attempts: number;
}

export class Outbox {
  private readonly stmts;

  constructor(private readonly db: Db) {
    this.stmts = {
      insert: db.prepare("INSERT INTO ul_outbox (kind, url, body, idempotency_key, created_at) VALUES (?, ?, ?, ?, ?)"),
      head: db.prepare("SELECT id, kind, url, body, idempotency_key, attempts FROM ul_outbox ORDER BY id LIMIT 1"),
      remove: db.prepare("DELETE FROM ul_outbox WHERE id = ?"),
      fail: db.prepare("UPDATE ul_outbox SET attempts = attempts + 1, last_error = ? WHERE id = ?"),
      count: db.prepare("SELECT count(*) FROM ul_outbox").pluck(),
      oldest: db.prepare("SELECT created_at FROM ul_outbox ORDER BY id LIMIT 1").pluck(),
    };
  }

  /** Commits a message; returns its id and Idempotency-Key (the caller's, or a new random one). */
  enqueue(kind: string, url: string, body: unknown, opts: { idempotencyKey?: string } = {}): { id: number; idempotency_key: string } {
    const key = opts.idempotencyKey ?? newKey();
    const r = this.stmts.insert.run(kind, url, JSON.stringify(body), key, new Date().toISOString());
    return { id: Number(r.lastInsertRowid), idempotency_key: key };
  }

  head(): OutboxMessage | undefined {
    return this.stmts.head.get() as OutboxMessage | undefined;
  }

  settle(id: number): void {
    this.stmts.remove.run(id);
  }

  recordFailure(id: number, error: string): void {
    this.stmts.fail.run(error.slice(0, 500), id);
  }

  size(): number {
    return this.stmts.count.get() as number;
  }

  /** When the oldest unsettled message was committed (ms since the epoch), or null. */
  oldestCreatedAt(): number | null {
    const at = this.stmts.oldest.get() as string | undefined;
    return at ? Date.parse(at) : null;
  }
}

/** A stable random id for this gateway's database, used to derive data-push keys. */
export function instanceId(db: Db): string {
  const get = db.prepare("SELECT value FROM ul_meta WHERE key = 'instance_id'").pluck();
  let id = get.get() as string | undefined;
  if (!id) {
    id = newKey();
    db.prepare("INSERT OR IGNORE INTO ul_meta (key, value) VALUES ('instance_id', ?)").run(id);
    id = get.get() as string;
  }
  return id;
}
