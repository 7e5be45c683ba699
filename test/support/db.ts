// Reads a daemon's SQLite database from the test: a read-only connection per call, closed
// again, so the daemon (another process or this one) keeps the only writer.
import Database from "better-sqlite3";
import { join } from "node:path";
import { DB_FILE } from "../../src/storage/db.js";

export type ReadDb = Database.Database;

/** Runs fn on a read-only connection to `file` (a database file or a data_dir) and closes it. */
export function readDb<T>(file: string, fn: (db: ReadDb) => T): T {
  const path = file.endsWith(".db") ? file : join(file, DB_FILE);
  const db = new Database(path, { readonly: true, fileMustExist: true });
  try {
    return fn(db);
  } finally {
    db.close();
  }
}

/** One value of a query (the first column of the first row). */
export function dbValue<T = number>(file: string, sql: string, ...params: unknown[]): T {
  return readDb(file, (db) => db.prepare(sql).pluck().get(...params) as T);
}
