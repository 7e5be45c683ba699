// What the updater does inside the daemon's data dir, which the daemon's user can write:
// remove stale health markers and backups, VACUUM INTO a backup before a migrating release,
// restore that backup at a rollback. `update apply` and `update check` run as root, so none
// of it runs as root: it runs in a child process with the data dir owner's uid and gid, where
// a symlink the daemon planted reaches nothing the daemon could not reach anyway. Root only
// looks (lstat) first, and refuses a symlinked `update/` folder or database file outright.
import { spawnSync, type SpawnSyncReturns } from "node:child_process";
import {
  closeSync,
  constants,
  fsyncSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  type Stats,
} from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { DB_FILE, TELEMETRY_DB_FILE } from "../storage/files.js";
import { BundleRefused } from "./bundle-format.js";
import { SitegateError } from "../errors.js";

const DB_PATHS = [DB_FILE, `${DB_FILE}-wal`, `${DB_FILE}-shm`, TELEMETRY_DB_FILE, `${TELEMETRY_DB_FILE}-wal`];

function lstatOrNull(path: string): Stats | null {
  try {
    return lstatSync(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw e;
  }
}

/**
 * Refuses (BundleRefused) a data dir whose `update/` folder is not a plain folder, or whose
 * database files are symlinks, hard links or not regular files.
 */
export function checkDataDir(dataDir: string): void {
  const upd = join(dataDir, "update");
  const u = lstatOrNull(upd);
  if (u && (u.isSymbolicLink() || !u.isDirectory()))
    throw new BundleRefused(
      `refused: ${upd} is ${u.isSymbolicLink() ? "a symbolic link" : "not a folder"}; the updater follows no link in the data dir`,
    );
  for (const name of DB_PATHS) {
    const p = join(dataDir, name);
    const st = lstatOrNull(p);
    if (!st) continue;
    if (st.isSymbolicLink()) throw new BundleRefused(`refused: ${p} is a symbolic link; the updater follows no link in the data dir`);
    if (!st.isFile()) throw new BundleRefused(`refused: ${p} is not a regular file`);
    if (st.nlink > 1) throw new BundleRefused(`refused: ${p} has ${st.nlink} hard links`);
  }
}

export interface PrepareRequest {
  version: string;
  /** take a backup when the release brings migrations the database has not run */
  migrations: Record<string, number> | null;
}

/**
 * The most a backup before a migrating release can take: the database and its WAL as they
 * are (VACUUM INTO writes no more than that). 0 without a database. Root only looks (lstat).
 */
export function backupBound(dataDir: string): number {
  return [DB_FILE, `${DB_FILE}-wal`].reduce((sum, f) => sum + (lstatOrNull(join(dataDir, f))?.size ?? 0), 0);
}

/** Before a release is switched in: drops its old health marker and old backups, backs the database up when it migrates. The backup's path or null. */
export function prepareDataDir(dataDir: string, req: PrepareRequest): string | null {
  if (!lstatOrNull(dataDir)) return null;
  checkDataDir(dataDir);
  const r = asOwner(dataDir, "prepare", JSON.stringify(req));
  return (r as { backup: string | null }).backup;
}

/** At a rollback: the backup replaces the database (its WAL must not be replayed onto it), and the release's health marker goes. */
export function restoreDataDir(dataDir: string, backup: string | null, version: string): boolean {
  if (!lstatOrNull(dataDir)) return false;
  checkDataDir(dataDir);
  if (backup) {
    const b = lstatOrNull(backup);
    if (b && (!b.isFile() || b.nlink > 1)) throw new BundleRefused(`refused: the backup ${backup} is not a plain file`);
  }
  const r = asOwner(dataDir, "restore", JSON.stringify({ backup, version }));
  return (r as { restored: boolean }).restored;
}

/** Runs this module as a child with the data dir owner's ids (when root); its last stdout line is JSON. */
function asOwner(dataDir: string, op: "prepare" | "restore", json: string): unknown {
  const real = realpathSync(dataDir);
  const r = runAsOwner(real, process.execPath, [fileURLToPath(import.meta.url), op, real, json]);
  if (r.status !== 0)
    throw new SitegateError(
      "UPDATE_FAILED",
      `data dir ${op} (as uid ${r.uid}) failed: ${(r.stderr || r.error?.message || `exit ${r.status}`).trim()}`,
    );
  return JSON.parse(r.stdout.trim().split("\n").at(-1) ?? "");
}

/**
 * Runs `node args` as the owner of `dir` (the daemon's user, as its unit runs it) when this
 * process is root and `dir` is not root's; as this process's user otherwise. `timeoutMs`
 * kills a child that hangs.
 */
export function runAsOwner(
  dir: string,
  node: string,
  args: string[],
  o: { timeoutMs?: number; env?: NodeJS.ProcessEnv } = {},
): SpawnSyncReturns<string> & { uid: number } {
  const st = statSync(dir);
  const me = typeof process.getuid === "function" ? process.getuid() : -1;
  const common = { cwd: "/", encoding: "utf8" as const, timeout: o.timeoutMs, killSignal: "SIGKILL" as const, maxBuffer: 4 << 20 };
  if (me !== 0 || (st.uid === 0 && st.gid === 0)) return { ...spawnSync(node, args, { ...common, env: o.env }), uid: me };
  if (hasSetIdCapabilities()) return { ...spawnSync(node, args, { ...common, env: o.env, uid: st.uid, gid: st.gid }), uid: st.uid };
  // The fleet's request unit keeps no CAP_SETUID/CAP_SETGID (docs/security.md, Unit hardening): the
  // service manager starts the child as the owner instead, over the socket root may use.
  const limit = o.timeoutMs ? [`--property=RuntimeMaxSec=${Math.ceil(o.timeoutMs / 1000)}`] : [];
  const unit = [...systemdRunArgs(st.uid, st.gid).slice(0, -1), ...limit, "--", node, ...args];
  return { ...spawnSync("systemd-run", unit, common), uid: st.uid };
}

/** systemd-run's options for a child as uid:gid whose output and exit status come back. */
export function systemdRunArgs(uid: number, gid: number): string[] {
  return ["--quiet", "--wait", "--pipe", "--collect", `--uid=${uid}`, `--gid=${gid}`, "--property=NoNewPrivileges=yes", "--"];
}

/** Whether this process may change its uid and gid (CAP_SETUID and CAP_SETGID effective). */
function hasSetIdCapabilities(): boolean {
  let status: string;
  try {
    status = readFileSync("/proc/self/status", "utf8");
  } catch {
    return true; // no /proc: try, and report the error of the spawn
  }
  const m = /^CapEff:\s*([0-9a-f]+)$/m.exec(status);
  if (!m) return true;
  const eff = BigInt(`0x${m[1]}`);
  const CAP_SETGID = 6n;
  const CAP_SETUID = 7n;
  return ((eff >> CAP_SETGID) & 1n) === 1n && ((eff >> CAP_SETUID) & 1n) === 1n;
}

// == the child: runs as the data dir's owner ==

function fsyncPath(path: string): void {
  const fd = openSync(path, constants.O_RDONLY);
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

async function childPrepare(dataDir: string, req: PrepareRequest): Promise<{ backup: string | null }> {
  const dir = join(dataDir, "update");
  rmSync(join(dir, `healthy-${req.version}`), { force: true });
  // backups belong to the update they were taken for; a new update makes them stale
  if (lstatOrNull(dir))
    for (const f of readdirSync(dir)) if (/^backup-before-.*\.db(\.tmp)?$/.test(f)) rmSync(join(dir, f), { force: true });
  const db = join(dataDir, DB_FILE);
  if (!req.migrations || !lstatOrNull(db)) return { backup: null };
  // Loaded here only: the updater's other paths never load SQLite.
  const { openExisting, migrationLevels } = await import("../storage/db.js");
  const conn = openExisting(db);
  try {
    const have = migrationLevels(conn);
    if (!Object.entries(req.migrations).some(([mod, v]) => v > (have[mod] ?? 0))) return { backup: null };
    mkdirSync(dir, { recursive: true });
    const out = join(dir, `backup-before-${req.version}.db`);
    const tmp = out + ".tmp";
    rmSync(tmp, { force: true });
    conn.prepare("VACUUM INTO ?").run(tmp);
    fsyncPath(tmp);
    renameSync(tmp, out);
    fsyncPath(dir);
    return { backup: out };
  } finally {
    conn.close();
  }
}

function childRestore(dataDir: string, req: { backup: string | null; version: string }): { restored: boolean } {
  let restored = false;
  if (req.backup && lstatOrNull(req.backup)) {
    const db = join(dataDir, DB_FILE);
    rmSync(db + "-wal", { force: true });
    rmSync(db + "-shm", { force: true });
    renameSync(req.backup, db);
    fsyncPath(dataDir);
    restored = true;
  }
  rmSync(join(dataDir, "update", `healthy-${req.version}`), { force: true });
  return { restored };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [op, dataDir, json] = process.argv.slice(2);
  const run =
    dataDir === undefined || json === undefined
      ? Promise.reject(new SitegateError("USAGE", "usage: data-dir.js prepare|restore DATA_DIR JSON"))
      : op === "prepare"
        ? childPrepare(dataDir, JSON.parse(json) as PrepareRequest)
        : op === "restore"
          ? Promise.resolve(childRestore(dataDir, JSON.parse(json)))
          : Promise.reject(new SitegateError("INTERNAL", `unknown op ${op}`));
  run.then(
    (r) => process.stdout.write(JSON.stringify(r) + "\n"),
    (e: unknown) => {
      process.stderr.write(`${e instanceof Error ? e.message : String(e)}\n`);
      process.exitCode = 1;
    },
  );
}
