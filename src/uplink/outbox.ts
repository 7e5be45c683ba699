// The durable outbox for callbacks that are messages in their own right (execution
// responses; any future kind): committed before the first send, removed only when the
// partner settled it. Each message belongs to a lane (execution responses to
// `execution`, any other kind to a lane of its own name) so that one kind never holds
// back another. Data pushes come from the sample store instead (data-push.ts), so every
// sample is written once, not twice; only a data push that was dead-lettered and then
// retried by hand comes back through this table (lane `data_push`).
// Dead letters (ul_dead_letter) are messages the partner kept rejecting: kept, listed by
// `sitegate outbox`, and put back in their lane by `sitegate outbox retry`.
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
    {
      version: 2,
      sql: `
        ALTER TABLE ul_outbox ADD COLUMN lane TEXT NOT NULL DEFAULT 'outbox';
        UPDATE ul_outbox SET lane = CASE kind WHEN 'execution_response' THEN 'execution' ELSE kind END;
        CREATE INDEX ul_outbox_lane ON ul_outbox (lane, id);
        CREATE UNIQUE INDEX ul_outbox_key ON ul_outbox (idempotency_key);
        CREATE TABLE ul_dead_letter (
          id INTEGER PRIMARY KEY AUTOINCREMENT,
          lane TEXT NOT NULL,
          kind TEXT NOT NULL,
          url TEXT NOT NULL,
          body TEXT NOT NULL,
          idempotency_key TEXT NOT NULL UNIQUE,
          created_at TEXT NOT NULL,
          dead_at TEXT NOT NULL,
          attempts INTEGER NOT NULL,
          last_error TEXT
        );
      `,
    },
  ],
};

/** The lane a kind of message travels in. */
export function laneOf(kind: string): string {
  return kind === "execution_response" ? "execution" : kind;
}

const KIND_RE = /^[a-z][a-z0-9_]{0,63}$/;
const KEY_RE = /^[\x21-\x7e]{1,200}$/;

export interface OutboxMessage {
  id: number;
  lane: string;
  kind: string;
  url: string;
  body: string;
  idempotency_key: string;
  attempts: number;
  created_at: string;
  last_error: string | null;
}

export interface DeadLetter extends OutboxMessage {
  dead_at: string;
}

const COLS = "id, lane, kind, url, body, idempotency_key, attempts, created_at, last_error";

export class Outbox {
  private readonly stmts;

  constructor(private readonly db: Db) {
    this.stmts = {
      insert: db.prepare("INSERT INTO ul_outbox (lane, kind, url, body, idempotency_key, created_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (idempotency_key) DO NOTHING"),
      byKey: db.prepare("SELECT id FROM ul_outbox WHERE idempotency_key = ?").pluck(),
      deadByKey: db.prepare("SELECT id FROM ul_dead_letter WHERE idempotency_key = ?").pluck(),
      heads: db.prepare(`SELECT ${COLS} FROM ul_outbox WHERE lane = ? ORDER BY id LIMIT ?`),
      get: db.prepare(`SELECT ${COLS} FROM ul_outbox WHERE id = ?`),
      remove: db.prepare("DELETE FROM ul_outbox WHERE id = ?"),
      fail: db.prepare("UPDATE ul_outbox SET attempts = attempts + 1, last_error = ? WHERE id = ?"),
      count: db.prepare("SELECT count(*) FROM ul_outbox").pluck(),
      lanes: db.prepare("SELECT DISTINCT lane FROM ul_outbox").pluck(),
      all: db.prepare(`SELECT ${COLS} FROM ul_outbox ORDER BY lane, id`),
      dead: db.prepare(`SELECT ${COLS}, dead_at FROM ul_dead_letter ORDER BY id`),
      deadGet: db.prepare(`SELECT ${COLS}, dead_at FROM ul_dead_letter WHERE id = ?`),
      deadInsert: db.prepare("INSERT INTO ul_dead_letter (lane, kind, url, body, idempotency_key, created_at, dead_at, attempts, last_error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (idempotency_key) DO NOTHING"),
      deadRemove: db.prepare("DELETE FROM ul_dead_letter WHERE id = ?"),
      deadCount: db.prepare("SELECT count(*) FROM ul_dead_letter").pluck(),
      requeue: db.prepare("INSERT INTO ul_outbox (lane, kind, url, body, idempotency_key, created_at, attempts, last_error) VALUES (?, ?, ?, ?, ?, ?, 0, ?) ON CONFLICT (idempotency_key) DO NOTHING"),
      oldest: db.prepare("SELECT lane, min(created_at) AS at FROM ul_outbox GROUP BY lane"),
    };
  }

  /**
   * Commits a message; returns its id and Idempotency-Key. A caller's own key makes the
   * call idempotent: a message with that key already queued (or dead-lettered) is
   * returned, not queued twice.
   */
  enqueue(kind: string, url: string, body: unknown, opts: { idempotencyKey?: string } = {}): { id: number; idempotency_key: string } {
    if (!KIND_RE.test(kind)) throw new TypeError(`outbox: kind ${JSON.stringify(kind)} must be snake_case letters and digits (e.g. "execution_response")`);
    let u: URL;
    try {
      u = new URL(url);
    } catch {
      throw new TypeError(`outbox: ${JSON.stringify(url)} is not a URL`);
    }
    if (u.protocol !== "https:") throw new TypeError(`outbox: callbacks go to https:// URLs only, not ${u.protocol}//`);
    if (opts.idempotencyKey !== undefined && !KEY_RE.test(opts.idempotencyKey)) {
      throw new TypeError("outbox: idempotencyKey must be 1 to 200 printable ASCII characters without spaces");
    }
    const text = JSON.stringify(body);
    if (text === undefined) throw new TypeError("outbox: the body cannot be serialized as JSON");
    const key = opts.idempotencyKey ?? newKey();
    const r = this.stmts.insert.run(laneOf(kind), kind, url, text, key, new Date().toISOString());
    if (r.changes === 1) return { id: Number(r.lastInsertRowid), idempotency_key: key };
    const id = (this.stmts.byKey.get(key) ?? this.stmts.deadByKey.get(key)) as number | undefined;
    return { id: id ?? 0, idempotency_key: key };
  }

  /** Up to `limit` oldest messages of a lane. */
  heads(lane: string, limit: number): OutboxMessage[] {
    return this.stmts.heads.all(lane, limit) as OutboxMessage[];
  }

  /** The oldest message of any lane (for diagnostics). */
  head(lane = "execution"): OutboxMessage | undefined {
    return this.heads(lane, 1)[0];
  }

  settle(id: number): void {
    this.stmts.remove.run(id);
  }

  recordFailure(id: number, error: string): void {
    this.stmts.fail.run(error.slice(0, 500), id);
  }

  /** Moves a pending message to the dead letters (one transaction). */
  deadLetter(id: number, error: string): void {
    this.db.transaction(() => {
      const m = this.stmts.get.get(id) as OutboxMessage | undefined;
      if (!m) return;
      this.stmts.deadInsert.run(m.lane, m.kind, m.url, m.body, m.idempotency_key, m.created_at, new Date().toISOString(), m.attempts + 1, error.slice(0, 500));
      this.stmts.remove.run(id);
    })();
  }

  /** Stores a message that never was in the outbox (a data push) as a dead letter. */
  addDeadLetter(m: { lane: string; kind: string; url: string; body: string; idempotency_key: string; created_at: string; attempts: number; error: string }): void {
    this.stmts.deadInsert.run(m.lane, m.kind, m.url, m.body, m.idempotency_key, m.created_at, new Date().toISOString(), m.attempts, m.error.slice(0, 500));
  }

  /** Puts dead letters back at the end of their lanes; returns how many. */
  retry(ids: number[] | "all"): number {
    return this.db.transaction(() => {
      const rows = ids === "all" ? (this.stmts.dead.all() as DeadLetter[]) : ids.map((id) => this.stmts.deadGet.get(id) as DeadLetter | undefined).filter((m): m is DeadLetter => !!m);
      for (const m of rows) {
        this.stmts.requeue.run(m.lane, m.kind, m.url, m.body, m.idempotency_key, m.created_at, m.last_error);
        this.stmts.deadRemove.run(m.id);
      }
      return rows.length;
    })();
  }

  lanes(): string[] {
    return this.stmts.lanes.all() as string[];
  }

  pending(): OutboxMessage[] {
    return this.stmts.all.all() as OutboxMessage[];
  }

  deadLetters(): DeadLetter[] {
    return this.stmts.dead.all() as DeadLetter[];
  }

  getDeadLetter(id: number): DeadLetter | undefined {
    return this.stmts.deadGet.get(id) as DeadLetter | undefined;
  }

  size(): number {
    return this.stmts.count.get() as number;
  }

  deadCount(): number {
    return this.stmts.deadCount.get() as number;
  }

  /** Per lane, when its oldest unsettled message was committed (ms since the epoch). */
  oldestByLane(): Array<{ lane: string; at: number }> {
    return (this.stmts.oldest.all() as Array<{ lane: string; at: string }>).map((r) => ({ lane: r.lane, at: Date.parse(r.at) }));
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
