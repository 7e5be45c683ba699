// The durable log of outbound messages (execution responses, event states, any other
// kind): each message is appended once, committed before the first send, and read by
// named consumers (`https`, `mqtt`) in lanes. A route says which consumer reads a message,
// in which lane, and where it goes (a URL, a topic); a cursor per consumer and lane marks
// the prefix that is settled. A message is deleted once every route has passed it. A
// message a consumer gave up on is copied into that consumer's dead letters, and a retry
// appends it again at the end of its lane with the same Idempotency-Key.
import type { Db, ModuleMigrations } from "../storage/db.js";
import type { StoragePart } from "../storage/part.js";

export const DELIVERY_MIGRATIONS: ModuleMigrations = {
  module: "delivery",
  migrations: [
    {
      version: 1,
      sql: `
        -- AUTOINCREMENT: ids are the log order and are never reused after a delete.
        CREATE TABLE dl_message (
          id INTEGER PRIMARY KEY AUTOINCREMENT,
          kind TEXT NOT NULL,
          body TEXT NOT NULL,
          idempotency_key TEXT NOT NULL,
          created_at TEXT NOT NULL
        );
        CREATE INDEX dl_message_key ON dl_message (idempotency_key);
        CREATE TABLE dl_route (
          consumer TEXT NOT NULL,
          lane TEXT NOT NULL,
          message_id INTEGER NOT NULL,
          address TEXT NOT NULL,
          PRIMARY KEY (consumer, lane, message_id)
        ) WITHOUT ROWID;
        CREATE INDEX dl_route_message ON dl_route (message_id);
        -- through: every message of the lane up to here is settled or dead-lettered;
        -- attempts and last_error: the failures of the lane's oldest message after it.
        CREATE TABLE dl_cursor (
          consumer TEXT NOT NULL,
          lane TEXT NOT NULL,
          through INTEGER NOT NULL DEFAULT 0,
          attempts INTEGER NOT NULL DEFAULT 0,
          last_error TEXT,
          PRIMARY KEY (consumer, lane)
        ) WITHOUT ROWID;
        CREATE TABLE dl_dead_letter (
          id INTEGER PRIMARY KEY AUTOINCREMENT,
          consumer TEXT NOT NULL,
          lane TEXT NOT NULL,
          kind TEXT NOT NULL,
          address TEXT NOT NULL,
          body TEXT NOT NULL,
          idempotency_key TEXT NOT NULL,
          created_at TEXT NOT NULL,
          dead_at TEXT NOT NULL,
          attempts INTEGER NOT NULL,
          last_error TEXT,
          UNIQUE (consumer, idempotency_key)
        );
      `,
    },
  ],
};

/** Who reads a message: a consumer, the lane it waits in there, and where it goes. */
export interface Route {
  consumer: string;
  lane: string;
  address: string;
}

/**
 * A sink's routing: where its consumer takes a kind of message the gateway hands over
 * (null: not for it). Each sink writes its own (uplink/callbacks.ts, fleet/mqtt-sink.ts);
 * what hands messages over (parts/dispatch-delivery.ts) asks them all.
 */
export type Routes = (kind: string) => Route | null;

/** A message as one consumer sees it. */
export interface LogMessage {
  id: number;
  consumer: string;
  lane: string;
  address: string;
  kind: string;
  body: string;
  idempotency_key: string;
  created_at: string;
  attempts: number;
  last_error: string | null;
}

export interface DeadLetter extends LogMessage {
  dead_at: string;
}

/** A message to append: `body` is the JSON text as it is sent. */
export interface NewMessage {
  kind: string;
  body: string;
  idempotencyKey: string;
  /** Defaults to now; a retried dead letter keeps its own. */
  createdAt?: string;
}

/**
 * Messages appended in this process, by any instance: a reader that found its lane empty
 * needs to look again only once this moved (or, for another process's appends, after a while).
 */
let appendsInProcess = 0;

const MSG = "m.id, r.consumer, r.lane, r.address, m.kind, m.body, m.idempotency_key, m.created_at";
const DEAD = "id, consumer, lane, address, kind, body, idempotency_key, created_at, attempts, last_error, dead_at";

function prepare(db: Db) {
  return {
    insert: db.prepare("INSERT INTO dl_message (kind, body, idempotency_key, created_at) VALUES (?, ?, ?, ?)"),
    route: db.prepare("INSERT INTO dl_route (consumer, lane, message_id, address) VALUES (?, ?, ?, ?)"),
    cursorRow: db.prepare("INSERT OR IGNORE INTO dl_cursor (consumer, lane) VALUES (?, ?)"),
    byKey: db.prepare("SELECT id FROM dl_message WHERE idempotency_key = ? LIMIT 1").pluck(),
    deadByKey: db.prepare("SELECT id FROM dl_dead_letter WHERE idempotency_key = ? LIMIT 1").pluck(),
    after: db.prepare(
      `SELECT ${MSG} FROM dl_route r JOIN dl_message m ON m.id = r.message_id WHERE r.consumer = ? AND r.lane = ? AND r.message_id > ? ORDER BY r.message_id LIMIT ?`,
    ),
    cursor: db.prepare("SELECT through, attempts, last_error FROM dl_cursor WHERE consumer = ? AND lane = ?"),
    advance: db.prepare(
      "UPDATE dl_cursor SET through = ?, attempts = 0, last_error = NULL WHERE consumer = ? AND lane = ? AND through < ?",
    ),
    fail: db.prepare("UPDATE dl_cursor SET attempts = attempts + 1, last_error = ? WHERE consumer = ? AND lane = ?"),
    passed: db
      .prepare("SELECT r.message_id FROM dl_route r WHERE r.consumer = ? AND r.lane = ? AND r.message_id > ? AND r.message_id <= ?")
      .pluck(),
    unsettled: db
      .prepare(
        "SELECT count(*) FROM dl_route r JOIN dl_cursor c ON c.consumer = r.consumer AND c.lane = r.lane WHERE r.message_id = ? AND r.message_id > c.through",
      )
      .pluck(),
    removeMessage: db.prepare("DELETE FROM dl_message WHERE id = ?"),
    removeRoutes: db.prepare("DELETE FROM dl_route WHERE message_id = ?"),
    pending: db.prepare(
      `SELECT ${MSG} FROM dl_route r JOIN dl_message m ON m.id = r.message_id JOIN dl_cursor c ON c.consumer = r.consumer AND c.lane = r.lane WHERE r.consumer = ? AND r.message_id > c.through ORDER BY r.lane, r.message_id`,
    ),
    count: db
      .prepare(
        "SELECT count(*) FROM dl_route r JOIN dl_cursor c ON c.consumer = r.consumer AND c.lane = r.lane WHERE r.consumer = ? AND r.message_id > c.through",
      )
      .pluck(),
    lanes: db
      .prepare(
        "SELECT c.lane FROM dl_cursor c WHERE c.consumer = ? AND EXISTS (SELECT 1 FROM dl_route r WHERE r.consumer = c.consumer AND r.lane = c.lane AND r.message_id > c.through)",
      )
      .pluck(),
    cursors: db.prepare("SELECT lane, attempts, last_error FROM dl_cursor WHERE consumer = ?"),
    oldest: db.prepare(
      "SELECT r.lane, min(m.created_at) AS at FROM dl_route r JOIN dl_message m ON m.id = r.message_id JOIN dl_cursor c ON c.consumer = r.consumer AND c.lane = r.lane WHERE r.consumer = ? AND r.message_id > c.through GROUP BY r.lane",
    ),
    deadInsert:
      db.prepare(`INSERT INTO dl_dead_letter (consumer, lane, kind, address, body, idempotency_key, created_at, dead_at, attempts, last_error)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (consumer, idempotency_key) DO NOTHING`),
    dead: db.prepare(`SELECT ${DEAD} FROM dl_dead_letter WHERE consumer = ? ORDER BY id`),
    deadGet: db.prepare(`SELECT ${DEAD} FROM dl_dead_letter WHERE consumer = ? AND id = ?`),
    deadRemove: db.prepare("DELETE FROM dl_dead_letter WHERE id = ?"),
    deadCount: db.prepare("SELECT count(*) FROM dl_dead_letter WHERE consumer = ?").pluck(),
  };
}

export class DeliveryLog {
  private stmts: ReturnType<typeof prepare> | null = null;
  private preparedFor: Db | null = null;
  /**
   * Lazy: dispatch may append a message before the consumers have started. `appended` is
   * called after every append in this process, with the message's routes.
   */
  constructor(
    private readonly storage: Pick<StoragePart, "db">,
    private readonly appended: (routes: readonly Route[]) => void = () => {},
  ) {}

  private get s() {
    const db = this.storage.db;
    if (this.preparedFor !== db) {
      this.stmts = prepare(db);
      this.preparedFor = db;
    }
    return this.stmts!;
  }

  /**
   * Commits a message for every route (inside the caller's transaction, if any). A key
   * that is already in the log or among the dead letters is not appended again: the
   * existing id is returned. Throws if SQLite cannot commit.
   */
  append(m: NewMessage, routes: readonly Route[]): { id: number; idempotency_key: string } {
    const s = this.s;
    const id = this.storage.db.transaction(() => {
      const existing = (s.byKey.get(m.idempotencyKey) ?? s.deadByKey.get(m.idempotencyKey)) as number | undefined;
      return existing ?? this.insert(m, routes);
    })();
    return { id, idempotency_key: m.idempotencyKey };
  }

  /**
   * Appends a message moved from an older table as it is, also when its key is already in
   * the log (the same execution response queued for two transports there).
   */
  appendMoved(m: NewMessage, routes: readonly Route[]): number {
    return this.insert(m, routes);
  }

  private insert(m: NewMessage, routes: readonly Route[]): number {
    const s = this.s;
    appendsInProcess++;
    const id = Number(s.insert.run(m.kind, m.body, m.idempotencyKey, m.createdAt ?? new Date().toISOString()).lastInsertRowid);
    for (const r of routes) {
      s.cursorRow.run(r.consumer, r.lane);
      s.route.run(r.consumer, r.lane, id, r.address);
    }
    // Announced after the caller's transaction; a wake-up before the commit only finds nothing new.
    queueMicrotask(() => this.appended(routes));
    return id;
  }

  /** Runs `fn` in one transaction (joins the caller's, if any). */
  atomically<T>(fn: () => T): T {
    return this.storage.db.transaction(fn)();
  }

  /** Counts the appends of this process (every instance): unchanged means nothing new from here. */
  get appends(): number {
    return appendsInProcess;
  }

  /** Where a consumer's lane stands: the settled prefix and the failures after it. */
  cursor(consumer: string, lane: string): { through: number; attempts: number; last_error: string | null } {
    return (
      (this.s.cursor.get(consumer, lane) as { through: number; attempts: number; last_error: string | null } | undefined) ?? {
        through: 0,
        attempts: 0,
        last_error: null,
      }
    );
  }

  /** Up to `limit` messages of a lane after id `after` (the caller starts at the cursor), oldest first. */
  after(consumer: string, lane: string, after: number, limit: number): LogMessage[] {
    const rows = this.s.after.all(consumer, lane, after, limit) as LogMessage[];
    return rows.map((m) => ({ ...m, attempts: 0, last_error: null }));
  }

  /**
   * The lane has settled (or dead-lettered) every message through `id`: the cursor moves
   * there, and messages no route still waits for are deleted, in one transaction.
   */
  advance(consumer: string, lane: string, id: number): void {
    const s = this.s;
    this.storage.db.transaction(() => {
      const from = this.cursor(consumer, lane).through;
      if (s.advance.run(id, consumer, lane, id).changes === 0) return;
      for (const mid of s.passed.all(consumer, lane, from, id) as number[]) {
        if ((s.unsettled.get(mid) as number) > 0) continue;
        s.removeRoutes.run(mid);
        s.removeMessage.run(mid);
      }
    })();
  }

  /** A failed attempt of the lane's oldest message (what `sitegate outbox` shows). */
  recordFailure(consumer: string, lane: string, error: string): void {
    this.s.fail.run(error.slice(0, 500), consumer, lane);
  }

  /** Copies a message into the consumer's dead letters; the lane then advances past it. */
  deadLetter(m: Omit<LogMessage, "id" | "last_error">, error: string): void {
    this.s.deadInsert.run(
      m.consumer,
      m.lane,
      m.kind,
      m.address,
      m.body,
      m.idempotency_key,
      m.created_at,
      new Date().toISOString(),
      m.attempts,
      error.slice(0, 500),
    );
  }

  /** Appends dead letters again at the end of their lanes, same key; returns how many. */
  retry(consumer: string, ids: number[] | "all"): number {
    const s = this.s;
    return this.storage.db.transaction(() => {
      const rows =
        ids === "all" ? this.deadLetters(consumer) : ids.map((id) => this.getDeadLetter(consumer, id)).filter((m): m is DeadLetter => !!m);
      for (const d of rows) {
        s.deadRemove.run(d.id);
        this.insert({ kind: d.kind, body: d.body, idempotencyKey: d.idempotency_key, createdAt: d.created_at }, [
          { consumer, lane: d.lane, address: d.address },
        ]);
      }
      return rows.length;
    })();
  }

  /** Every message a consumer has not settled yet, by lane, oldest first. */
  pending(consumer: string): LogMessage[] {
    const failures = new Map(
      (this.s.cursors.all(consumer) as Array<{ lane: string; attempts: number; last_error: string | null }>).map((c) => [c.lane, c]),
    );
    const seen = new Set<string>();
    return (this.s.pending.all(consumer) as LogMessage[]).map((m) => {
      const head = !seen.has(m.lane);
      seen.add(m.lane);
      const f = head ? failures.get(m.lane) : undefined;
      return { ...m, attempts: f?.attempts ?? 0, last_error: f?.last_error ?? null };
    });
  }

  size(consumer: string): number {
    return this.s.count.get(consumer) as number;
  }

  /** The lanes of a consumer that have messages waiting. */
  lanes(consumer: string): string[] {
    return this.s.lanes.all(consumer) as string[];
  }

  /** Per lane, when its oldest unsettled message was committed (ms since the epoch). */
  oldestByLane(consumer: string): Array<{ lane: string; at: number }> {
    return (this.s.oldest.all(consumer) as Array<{ lane: string; at: string }>).map((r) => ({ lane: r.lane, at: Date.parse(r.at) }));
  }

  deadLetters(consumer: string): DeadLetter[] {
    return this.s.dead.all(consumer) as DeadLetter[];
  }

  getDeadLetter(consumer: string, id: number): DeadLetter | undefined {
    return this.s.deadGet.get(consumer, id) as DeadLetter | undefined;
  }

  deadCount(consumer: string): number {
    return this.s.deadCount.get(consumer) as number;
  }
}
