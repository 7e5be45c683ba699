// The one SQLite database of the gateway: open with pragmas, run numbered migrations.
// Each module owns its tables and registers its own migrations here under its name,
// so SQL stays next to the module that owns it (schema_migrations(module, version)).
import Database from "better-sqlite3";
import { accessSync, closeSync, constants, fstatSync, fsyncSync, mkdirSync, openSync, writeSync } from "node:fs";
import { join } from "node:path";
import { SitegateError } from "../errors.js";
import { DB_FILE } from "./files.js";

export type Db = Database.Database;

export interface Migration {
  /** 1, 2, 3... in order; never renumber or edit one that has shipped. */
  version: number;
  sql: string | ((db: Db) => void);
}

export interface ModuleMigrations {
  module: string;
  migrations: Migration[];
}

export { DB_FILE, TELEMETRY_DB_FILE } from "./files.js";

export interface OpenOptions {
  /** Bytes a page, for a new file (default 4096). */
  pageSize?: number;
  /** For a new file (default INCREMENTAL). */
  autoVacuum?: "NONE" | "INCREMENTAL";
  /** Hold the file exclusively: no -shm file, no readers in other processes. */
  exclusive?: boolean;
}

export function openDatabase(dataDir: string, file = DB_FILE, opts: OpenOptions = {}): Db {
  try {
    mkdirSync(dataDir, { recursive: true });
    accessSync(dataDir, constants.W_OK | constants.R_OK);
  } catch (e) {
    throw new SitegateError("STORAGE_UNAVAILABLE", `data_dir ${dataDir} is not writable: ${(e as Error).message}`, { cause: e });
  }
  const path = join(dataDir, file);
  let db: Db;
  try {
    db = new Database(path);
    // page_size and auto_vacuum only take effect on a new file (before the first table).
    db.pragma(`page_size = ${opts.pageSize ?? 4096}`);
    db.pragma(`auto_vacuum = ${opts.autoVacuum ?? "INCREMENTAL"}`);
    // Before the first access in WAL mode, so that no -shm file is ever made.
    if (opts.exclusive) db.pragma("main.locking_mode = EXCLUSIVE");
    db.pragma("journal_mode = WAL");
    db.pragma("synchronous = NORMAL");
    db.pragma("foreign_keys = ON");
    db.pragma("busy_timeout = 2000");
    const check = db.pragma("quick_check", { simple: true });
    if (check !== "ok") throw new SitegateError("STORAGE_CORRUPT", `quick_check: ${String(check)}`);
  } catch (e) {
    if (e instanceof SitegateError) throw e;
    if (/^SQLITE_BUSY/.test((e as { code?: string }).code ?? ""))
      throw new SitegateError("STORAGE_UNAVAILABLE", `database ${path} is held by another process (is the gateway already running?)`, {
        cause: e,
      });
    throw new SitegateError("STORAGE_CORRUPT", `database ${path} cannot be opened: ${(e as Error).message}`, { cause: e });
  }
  db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
    module TEXT NOT NULL, version INTEGER NOT NULL, applied_at TEXT NOT NULL,
    PRIMARY KEY (module, version)) WITHOUT ROWID`);
  return db;
}

/** Applies every migration not yet applied, each in its own transaction. Returns how many ran. */
export function migrate(db: Db, mods: ModuleMigrations[]): number {
  const applied = db.prepare("SELECT version FROM schema_migrations WHERE module = ?").pluck();
  const mark = db.prepare("INSERT INTO schema_migrations (module, version, applied_at) VALUES (?, ?, ?)");
  let ran = 0;
  for (const mod of mods) {
    const done = new Set(applied.all(mod.module) as number[]);
    const sorted = [...mod.migrations].sort((a, b) => a.version - b.version);
    sorted.forEach((m, i) => {
      if (m.version !== i + 1) throw new SitegateError("INTERNAL", `migrations of ${mod.module} are not numbered 1..n`);
    });
    for (const m of sorted) {
      if (done.has(m.version)) continue;
      db.transaction(() => {
        if (typeof m.sql === "string") db.exec(m.sql);
        else m.sql(db);
        mark.run(mod.module, m.version, new Date().toISOString());
      })();
      ran++;
    }
  }
  return ran;
}

/** SQLite's WAL format: the file's header, and each frame's header before its page. */
const WAL_HEADER_BYTES = 32;
const WAL_FRAME_HEADER_BYTES = 24;
/** Frames beyond the checkpoint threshold: the commit that crosses it still fits. */
const WAL_HEADROOM = 0.1;

/** The bytes of a WAL that holds `frames` pages of `pageSize`. */
export function walBytes(frames: number, pageSize: number): number {
  return WAL_HEADER_BYTES + frames * (pageSize + WAL_FRAME_HEADER_BYTES);
}

/**
 * Gives a database's WAL file its working size at once, in zeros, and syncs it: the
 * checkpoint threshold (`wal_autocheckpoint`) and a tenth more. SQLite writes its frames
 * from the start of the WAL again after each checkpoint and never shrinks the file (no
 * `journal_size_limit`), so from then on a commit overwrites blocks the file already has:
 * its size and block map do not change, so no commit allocates (block bitmap, group
 * descriptor, extent and size, journaled on an ext4 card with every commit while the WAL
 * grew; measured in docs/sd-card.md). The file's new modification time is still journaled. Zeros are
 * no frame (a frame carries the WAL header's salt and a checksum), so recovery stops at them
 * as at the end of the file. Only for a database held exclusively (no other connection
 * reads this WAL), opened in WAL mode. Returns the bytes added (0 when the file is that
 * large already, or when SQLite has not made it yet).
 */
export function preallocateWal(db: Db): number {
  const pageSize = db.pragma("page_size", { simple: true }) as number;
  const frames = db.pragma("wal_autocheckpoint", { simple: true }) as number;
  const target = walBytes(Math.ceil(frames * (1 + WAL_HEADROOM)), pageSize);
  let fd: number;
  try {
    fd = openSync(`${db.name}-wal`, "r+");
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return 0;
    throw e;
  }
  try {
    const size = fstatSync(fd).size;
    if (size >= target) return 0;
    const zeros = Buffer.alloc(64 * 1024);
    for (let at = size; at < target;) at += writeSync(fd, zeros, 0, Math.min(zeros.length, target - at), at);
    fsyncSync(fd);
    return target - size;
  } finally {
    closeSync(fd);
  }
}

/** An existing database file as it is: no pragmas, no migrations (the updater's backup). */
export function openExisting(path: string): Db {
  return new Database(path, { fileMustExist: true });
}

/** The highest migration applied per module (empty for a database without any). */
export function migrationLevels(db: Db): Record<string, number> {
  const table = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'").get();
  if (!table) return {};
  const rows = db.prepare("SELECT module, MAX(version) AS v FROM schema_migrations GROUP BY module").all() as Array<{
    module: string;
    v: number;
  }>;
  return Object.fromEntries(rows.map((r) => [r.module, r.v]));
}

/** Forgets a module's migrations (its tables were moved to another database, which migrates them from 1). */
export function forgetMigrations(db: Db, module: string): void {
  db.prepare("DELETE FROM schema_migrations WHERE module = ?").run(module);
}

/** SQLite's result codes (extended ones start with these) that mean "cannot commit now": disk full, locked, read-only, I/O error. */
const CANNOT_COMMIT = /^SQLITE_(FULL|BUSY|LOCKED|READONLY|IOERR|CANTOPEN)/;

/**
 * SQLite's "cannot commit now" as STORAGE_UNAVAILABLE (transient: the same request may
 * succeed once the disk has room or the lock is gone); any other error as it is. The one
 * place that looks at SQLite's codes, so no front end does.
 */
export function storageError(e: unknown): unknown {
  const code = (e as { code?: unknown } | null)?.code;
  if (e instanceof SitegateError || typeof code !== "string" || !CANNOT_COMMIT.test(code)) return e;
  return new SitegateError("STORAGE_UNAVAILABLE", `storage cannot commit now (${code}); nothing was stored`, { transient: true, cause: e });
}

/** Runs `fn` (statements on a database), with SQLite's "cannot commit now" thrown as STORAGE_UNAVAILABLE. */
export function storageWrite<T>(fn: () => T): T {
  try {
    return fn();
  } catch (e) {
    throw storageError(e);
  }
}
