// The names of the database files in the data dir. Apart from db.ts so that code which
// only handles the files (the updater's backup and restore) does not load SQLite.
export const DB_FILE = "sitegate.db";
/**
 * The telemetry buffer's own database: small pages, no auto-vacuum pointer maps, and held
 * exclusively by the daemon, so SQLite keeps the WAL index in memory instead of a -shm
 * file whose pages every commit dirties (measured: the largest share of the bytes a
 * telemetry commit wrote). No other process can read it while the daemon runs.
 */
export const TELEMETRY_DB_FILE = "telemetry.db";
