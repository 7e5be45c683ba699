// Reads a daemon's SQLite databases from the test: a read-only connection per call, closed
// again, so the daemon (another process or this one) keeps the only writer. telemetry.db is
// held exclusively by a running daemon: read it after the daemon stopped (or died), and a
// running daemon's telemetry counters through /metrics (daemonMetric).
import Database from "better-sqlite3";
import { join } from "node:path";
import { Agent, request } from "undici";
import { DB_FILE, TELEMETRY_DB_FILE } from "../../src/storage/db.js";

export type ReadDb = Database.Database;

/** Runs fn on a read-only connection to `file` (a database file, or a data_dir: its sitegate.db) and closes it. */
export function readDb<T>(file: string, fn: (db: ReadDb) => T): T {
  const path = file.endsWith(".db") ? file : join(file, DB_FILE);
  const db = new Database(path, { readonly: true, fileMustExist: true });
  try {
    return fn(db);
  } finally {
    db.close();
  }
}

/** readDb on a data_dir's telemetry.db (the daemon must not be running). */
export function readTelemetry<T>(dataDir: string, fn: (db: ReadDb) => T): T {
  return readDb(join(dataDir, TELEMETRY_DB_FILE), fn);
}

/** One value of a query (the first column of the first row). */
export function dbValue<T = number>(file: string, sql: string, ...params: unknown[]): T {
  return readDb(
    file,
    (db) =>
      db
        .prepare(sql)
        .pluck()
        .get(...params) as T,
  );
}

const insecure = new Agent({ connect: { rejectUnauthorized: false } });

/** The value of one unlabelled series of a running daemon's /metrics (NaN when absent). */
export async function daemonMetric(baseUrl: string, name: string): Promise<number> {
  const r = await request(`${baseUrl}/metrics`, { dispatcher: insecure });
  const text = await r.body.text();
  if (r.statusCode !== 200) throw new Error(`/metrics: HTTP ${r.statusCode}`);
  return Number(new RegExp(`^${name} (\\S+)$`, "m").exec(text)?.[1] ?? NaN);
}
