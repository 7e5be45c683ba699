// The sample store's tables and the shapes its readers see. tm_snapshot holds one row per
// snapshot (packed, delta-codec.ts), tm_series the (device, metric) pairs the rows refer
// to, tm_state the consumers' cursors and the drop counters.
import type { Db, ModuleMigrations } from "../storage/db.js";
import type { Snapshot } from "./types.js";

export const SAMPLE_MIGRATIONS: ModuleMigrations = {
  module: "telemetry",
  migrations: [
    {
      version: 1,
      sql: `
        CREATE TABLE tm_series (id INTEGER PRIMARY KEY, device_id TEXT NOT NULL, metric TEXT NOT NULL, UNIQUE (device_id, metric));
        CREATE TABLE tm_snapshot (id INTEGER PRIMARY KEY AUTOINCREMENT, ts INTEGER NOT NULL, n INTEGER NOT NULL, data BLOB NOT NULL);
        CREATE TABLE tm_state (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
        INSERT INTO tm_state (key, value) VALUES ('push_cursor', 0), ('dropped_samples', 0), ('dropped_snapshots', 0);
      `,
    },
    {
      // Rows packed against their key row (base; NULL: a row of version 1, packed alone) and
      // the push cursor in the last row of a commit. No AUTOINCREMENT (its sqlite_sequence
      // page was one more page written per commit): ids are never reused because last_id
      // is kept whenever rows are deleted.
      version: 2,
      sql: `
        CREATE TABLE tm_snapshot_v2 (id INTEGER PRIMARY KEY, ts INTEGER NOT NULL, n INTEGER NOT NULL, data BLOB NOT NULL, base INTEGER, cursor INTEGER);
        INSERT INTO tm_snapshot_v2 (id, ts, n, data) SELECT id, ts, n, data FROM tm_snapshot;
        INSERT INTO tm_state (key, value) VALUES ('last_id', (SELECT coalesce(max(seq), 0) FROM sqlite_sequence WHERE name = 'tm_snapshot'));
        DROP TABLE tm_snapshot;
        ALTER TABLE tm_snapshot_v2 RENAME TO tm_snapshot;
      `,
    },
  ],
};

export interface StoredSnapshot extends Snapshot {
  id: number;
}

/** One reader of the buffer: the snapshots after its cursor, and how far it has them. */
export interface TelemetryCursor {
  readonly name: string;
  /** Every snapshot through here is settled for this consumer. */
  readonly through: number;
  /** Snapshots not yet settled for this consumer. */
  readonly backlog: number;
  /** Its snapshots after the cursor (or `afterId`), oldest first. */
  pending(limit: number, afterId?: number): StoredSnapshot[];
  /** It has the snapshots through `id`: in memory now, persisted with a commit (a crash sends again at most that much). */
  settleThrough(id: number): void;
}

export interface SampleStoreStats {
  snapshots: number;
  pending_snapshots: number;
  bytes: number;
  dropped_samples: number;
  dropped_snapshots: number;
  push_cursor: number;
  stored_samples_total: number;
  /** Bytes of the packed samples committed since start (the reference of the write budget). */
  stored_bytes_total: number;
  /** What the same samples would take packed alone, each snapshot without deltas (what deltas save). */
  stored_alone_bytes_total: number;
  /** Snapshots committed since start. */
  committed_snapshots_total: number;
}

/** Snapshots after the data push's cursor, read from a telemetry.db the daemon is not holding (`sitegate outbox`). */
export function pendingDataPush(db: Db): number {
  const cursor = (db.prepare("SELECT value FROM tm_state WHERE key = 'push_cursor'").pluck().get() as number | undefined) ?? 0;
  return db.prepare("SELECT count(*) FROM tm_snapshot WHERE id > ?").pluck().get(cursor) as number;
}

/** The store's prepared statements on telemetry.db (sample-store.ts). */
export function prepareStatements(db: Db) {
  return {
    insertSeries: db.prepare("INSERT INTO tm_series (id, device_id, metric) VALUES (?, ?, ?)"),
    insertSnap: db.prepare("INSERT INTO tm_snapshot (id, ts, n, data, base, cursor) VALUES (?, ?, ?, ?, ?, ?)"),
    firstAfter: db.prepare("SELECT id, base FROM tm_snapshot WHERE id > ? ORDER BY id LIMIT 1"),
    from: db.prepare("SELECT id, ts, data, base FROM tm_snapshot WHERE id >= ? ORDER BY id"),
    oldestPending: db.prepare("SELECT id, length(data) AS len, base FROM tm_snapshot WHERE id > ? ORDER BY id LIMIT ?"),
    deleteThrough: db.prepare("DELETE FROM tm_snapshot WHERE id <= ?"),
    setState: db.prepare("INSERT INTO tm_state (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value"),
    addState: db.prepare("UPDATE tm_state SET value = value + ? WHERE key = ?"),
    getState: db.prepare("SELECT value FROM tm_state WHERE key = ?").pluck(),
    count: db.prepare(
      "SELECT count(*) AS n, coalesce(sum(length(data)), 0) AS bytes, coalesce(max(id), 0) AS last, coalesce(max(cursor), 0) AS cursor FROM tm_snapshot",
    ),
    countThrough: db.prepare("SELECT count(*) AS n, coalesce(sum(length(data)), 0) AS bytes FROM tm_snapshot WHERE id <= ?"),
    countBetween: db.prepare(
      "SELECT count(*) AS rows, coalesce(sum(n), 0) AS samples, coalesce(sum(length(data)), 0) AS bytes FROM tm_snapshot WHERE id > ? AND id <= ?",
    ),
  };
}

export type SampleStatements = ReturnType<typeof prepareStatements>;
