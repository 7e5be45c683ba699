// The partner's callbacks in the delivery log (consumer `https`): messages in their own
// right (execution responses; any future kind), committed before the first send and
// settled only by the partner. Each belongs to a lane (execution responses to
// `execution`, any other kind to a lane of its own name) so that one kind never holds
// back another. Data pushes come from the sample store instead (data-push.ts), so every
// sample is written once, not twice; only a data push that was dead-lettered and then
// retried by hand comes back through the log (lane `data_push`).
// Dead letters are messages the partner kept rejecting: kept in the log, listed by
// `sitegate outbox`, and put back in their lane by `sitegate outbox retry`.
// Migration 3 moves the rows of ul_outbox and ul_dead_letter (migrations 1 and 2), the
// tables of an earlier release, into the log; ul_meta keeps the instance id.
import type { Db, ModuleMigrations } from "../storage/db.js";
import { DELIVERY_MIGRATIONS, DeliveryLog, type Route, type Routes } from "../delivery/log.js";
import { migrate } from "../storage/db.js";
import { newKey } from "../util/idempotency.js";
import { SitegateError } from "../errors.js";

export const HTTPS = "https";

export const UPLINK_MIGRATIONS: ModuleMigrations = {
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
    // The callbacks move into the delivery log (consumer https), keys and order kept.
    { version: 3, sql: (db) => moveIntoLog(db) },
  ],
};

function moveIntoLog(db: Db): void {
  migrate(db, [DELIVERY_MIGRATIONS]);
  const log = new DeliveryLog({ db });
  const pending = db
    .prepare("SELECT id, lane, kind, url, body, idempotency_key, created_at, attempts, last_error FROM ul_outbox ORDER BY id")
    .all() as Array<{
    lane: string;
    kind: string;
    url: string;
    body: string;
    idempotency_key: string;
    created_at: string;
    attempts: number;
    last_error: string | null;
  }>;
  for (const m of pending) {
    log.appendMoved({ kind: m.kind, body: m.body, idempotencyKey: m.idempotency_key, createdAt: m.created_at }, [
      { consumer: HTTPS, lane: m.lane, address: m.url },
    ]);
  }
  // A lane's head keeps its failure count: `sitegate outbox` still shows it.
  for (const m of pending) {
    if (m.attempts > 0 && log.cursor(HTTPS, m.lane).attempts === 0)
      db.prepare("UPDATE dl_cursor SET attempts = ?, last_error = ? WHERE consumer = ? AND lane = ?").run(
        m.attempts,
        m.last_error,
        HTTPS,
        m.lane,
      );
  }
  db.prepare(`INSERT INTO dl_dead_letter (consumer, lane, kind, address, body, idempotency_key, created_at, dead_at, attempts, last_error)
    SELECT ?, lane, kind, url, body, idempotency_key, created_at, dead_at, attempts, last_error FROM ul_dead_letter ORDER BY id`).run(
    HTTPS,
  );
  db.exec("DROP TABLE ul_outbox; DROP TABLE ul_dead_letter;");
}

/** The lane a kind of message travels in. */
export function laneOf(kind: string): string {
  return kind === "execution_response" ? "execution" : kind;
}

const KIND_RE = /^[a-z][a-z0-9_]{0,63}$/;
const KEY_RE = /^[\x21-\x7e]{1,200}$/;

/** The partner's routing: execution responses to its execution callback; nothing else dispatch hands over. */
export function partnerRoutes(executionUrl: string): Routes {
  return (kind) => (kind === "execution_response" ? httpsRoute(kind, executionUrl) : null);
}

/** Where a callback of `kind` to `url` waits in the log; INVALID_REQUEST on a bad kind or URL. */
export function httpsRoute(kind: string, url: string): Route {
  if (!KIND_RE.test(kind))
    throw new SitegateError(
      "INVALID_REQUEST",
      `delivery log: kind ${JSON.stringify(kind)} must be snake_case letters and digits (e.g. "execution_response")`,
    );
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new SitegateError("INVALID_REQUEST", `delivery log: ${JSON.stringify(url)} is not a URL`);
  }
  if (u.protocol !== "https:")
    throw new SitegateError("INVALID_REQUEST", `delivery log: callbacks go to https:// URLs only, not ${u.protocol}//`);
  return { consumer: HTTPS, lane: laneOf(kind), address: url };
}

/** A message body as JSON text, and its key (the caller's or a new one); INVALID_REQUEST on a bad key or body. */
export function messageOf(kind: string, body: unknown, idempotencyKey?: string): { kind: string; body: string; idempotencyKey: string } {
  if (idempotencyKey !== undefined && !KEY_RE.test(idempotencyKey)) {
    throw new SitegateError("INVALID_REQUEST", "delivery log: idempotencyKey must be 1 to 200 printable ASCII characters without spaces");
  }
  const text = JSON.stringify(body);
  if (text === undefined) throw new SitegateError("INVALID_REQUEST", "delivery log: the body cannot be serialized as JSON");
  return { kind, body: text, idempotencyKey: idempotencyKey ?? newKey() };
}

/**
 * Commits a callback of `kind` to `url` to the log (its lane wakes on `messages_appended`)
 * and returns its id and Idempotency-Key. A caller's own key makes the call idempotent
 * across a crash: a message with that key already queued (or dead-lettered) is returned,
 * not queued twice. Throws INVALID_REQUEST on bad input, STORAGE_UNAVAILABLE if SQLite cannot commit.
 */
export function queueCallback(
  log: DeliveryLog,
  kind: string,
  url: string,
  body: unknown,
  opts: { idempotencyKey?: string } = {},
): { id: number; idempotency_key: string } {
  const route = httpsRoute(kind, url);
  return log.append(messageOf(kind, body, opts.idempotencyKey), [route]);
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
