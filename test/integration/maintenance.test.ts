// What the maintenance jobs do to the real SQLite files (src/maintenance.ts), each job run
// by hand (their UTC timers are tested in unit/utc-schedule): the retention sweep deletes
// the settled telemetry rows, keeps their pages for the next rows, and gives the free pages
// back (VACUUM) once a drained backlog left most of telemetry.db free; the nightly
// checkpoint empties sitegate.db's WAL file and folds telemetry's back into its file, keeping
// the WAL's size (its blocks are reused in place).
import { test } from "node:test";
import assert from "node:assert/strict";
import { copyFileSync, existsSync, mkdirSync, readFileSync, statSync } from "node:fs";
import Database from "better-sqlite3";
import { join } from "node:path";
import { StoragePart } from "../../src/storage/part.js";
import { SAMPLE_MIGRATIONS, SampleStore } from "../../src/telemetry/sample-store.js";
import { FREE_TO_VACUUM, Maintenance } from "../../src/maintenance.js";
import { DB_FILE, TELEMETRY_DB_FILE, walBytes } from "../../src/storage/db.js";
import { silentLogger } from "../../src/log.js";
import { testConfig } from "../support/config.js";
import { snapshot } from "../support/uplink-harness.js";
import { withTmpDir } from "../support/tmp.js";

async function withStore(
  fn: (r: { storage: StoragePart; samples: SampleStore; maintenance: Maintenance; dir: string }) => void,
  commitIntervalMs?: number,
): Promise<void> {
  await withTmpDir((dir) => {
    const log = silentLogger();
    const storage = new StoragePart(dir, [SAMPLE_MIGRATIONS], log);
    const samples = new SampleStore(storage, { retentionBytes: 64 * 1024 * 1024, log, commitIntervalMs });
    const maintenance = new Maintenance(testConfig(dir), storage, samples, log);
    storage.start();
    samples.start();
    try {
      fn({ storage, samples, maintenance, dir });
    } finally {
      samples.stop();
      storage.stop();
    }
  });
}

test("an ordinary sweep deletes settled telemetry rows and keeps their pages for the next rows", async () => {
  await withStore(({ storage, samples, maintenance }) => {
    const db = storage.telemetryDb;
    const pageCount = () => db.pragma("page_count", { simple: true }) as number;
    const empty = pageCount();
    for (let i = 0; i < 300; i++) samples.append(snapshot(i, 3));
    const pages = pageCount();
    samples.consumer("push", { inRow: true }).settleThrough(samples.stats().pending_snapshots - 10 + samples.stats().push_cursor);
    maintenance.sweep();
    assert.equal(db.prepare("SELECT count(*) FROM tm_snapshot").pluck().get(), 10, "only the unsent rows remain");
    const free = db.pragma("freelist_count", { simple: true }) as number;
    assert.ok(free > 0 && free * 1024 < FREE_TO_VACUUM, `${free} free pages kept in the file`);
    assert.equal(pageCount(), pages, "the file keeps its size: nothing was rewritten");
    for (let i = 300; i < 600; i++) samples.append(snapshot(i, 3));
    assert.ok(pageCount() - pages < (pages - empty) / 2, `the next 300 rows reused the free pages (${pages} -> ${pageCount()} pages)`);
  });
});

/**
 * Transactions in telemetry's WAL since it last started over, read from the file: frames
 * that carry the WAL header's salts, counting those that end a commit (a database size set).
 */
function walCommits(dir: string): number {
  const wal = readFileSync(join(dir, `${TELEMETRY_DB_FILE}-wal`));
  const pageSize = wal.readUInt32BE(8);
  const [salt1, salt2] = [wal.readUInt32BE(16), wal.readUInt32BE(20)];
  let commits = 0;
  for (let at = 32; at + 24 + pageSize <= wal.length; at += 24 + pageSize) {
    if (wal.readUInt32BE(at + 8) !== salt1 || wal.readUInt32BE(at + 12) !== salt2) break;
    if (wal.readUInt32BE(at + 4) !== 0) commits++;
  }
  return commits;
}

test("with snapshots held for the next commit, the sweep's deletes go into that commit: no transaction of their own", async () => {
  await withStore(({ storage, samples, maintenance, dir }) => {
    const rows = () => storage.telemetryDb.prepare("SELECT count(*) FROM tm_snapshot").pluck().get();
    for (let i = 0; i < 20; i++) samples.append(snapshot(i, 3));
    samples.flush(); // the interval's commit: ids 1..20
    for (let i = 20; i < 30; i++) samples.append(snapshot(i, 3)); // held for the next one
    const first = samples.stats().push_cursor;
    samples.consumer("push", { inRow: true }).settleThrough(first + 20);
    const commits = walCommits(dir);
    maintenance.sweep();
    assert.equal(walCommits(dir), commits, "the sweep wrote no transaction of its own");
    assert.equal(rows(), 20, "nothing deleted before the commit");
    samples.flush();
    assert.equal(walCommits(dir), commits + 1, "one transaction: the held snapshots and the sweep");
    assert.equal(rows(), 10, "the settled commit's rows were deleted in it");
    assert.equal(storage.telemetryDb.prepare("SELECT value FROM tm_state WHERE key = 'push_cursor'").pluck().get(), first + 20);
    assert.equal(samples.stats().snapshots, 10, "the counters follow the commit");
    // Nothing held: the sweep runs at once.
    samples.consumer("push", { inRow: true }).settleThrough(first + 30);
    maintenance.sweep();
    assert.equal(walCommits(dir), commits + 2);
    assert.equal(rows(), 0);
  }, 60_000);
});

test("a sweep that waited for a commit runs alone when that commit fails: the pages it frees may be what the next try needs", async () => {
  await withStore(({ storage, samples, maintenance }) => {
    const db = storage.telemetryDb;
    const rows = () => db.prepare("SELECT count(*) FROM tm_snapshot").pluck().get();
    for (let i = 0; i < 20; i++) samples.append(snapshot(i, 3));
    samples.flush();
    for (let i = 20; i < 30; i++) samples.append(snapshot(i, 3));
    samples.consumer("push", { inRow: true }).settleThrough(samples.stats().push_cursor + 20);
    maintenance.sweep();
    assert.equal(rows(), 20, "the sweep waits for the commit");
    // The commit fails (as on a full disk: every insert refused); the deletes do not.
    db.exec("CREATE TRIGGER refuse BEFORE INSERT ON tm_snapshot BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END");
    samples.flush();
    assert.equal(rows(), 0, "the sweep ran alone and deleted the settled rows");
    assert.equal(samples.stats().snapshots, 10, "the 10 held snapshots wait for the next try");
    db.exec("DROP TRIGGER refuse");
    samples.flush();
    assert.equal(rows(), 10, "the next try commits them");
  }, 60_000);
});

test("a sweep after a drained backlog deletes the settled rows and gives the free pages back to the file system", async () => {
  await withStore(({ storage, samples, maintenance }) => {
    const db = storage.telemetryDb;
    for (let i = 0; i < 6000; i++) samples.append(snapshot(i, 40));
    const pages = db.pragma("page_count", { simple: true }) as number;
    assert.ok(pages * 1024 > 2 * FREE_TO_VACUUM, `${pages} pages: a backlog the sweep gives back`);
    // The partner has all but the last 10; the cursor is not persisted yet (that waits for a sweep).
    const last = samples.stats().push_cursor + samples.stats().pending_snapshots;
    samples.consumer("push", { inRow: true }).settleThrough(last - 10);
    assert.equal(db.prepare("SELECT count(*) FROM tm_snapshot").pluck().get(), 6000, "nothing deleted before the sweep");

    maintenance.sweep();
    assert.equal(db.prepare("SELECT count(*) FROM tm_snapshot").pluck().get(), 10, "only the unsent rows remain");
    assert.equal(db.prepare("SELECT value FROM tm_state WHERE key = 'push_cursor'").pluck().get(), last - 10, "the cursor is persisted");
    assert.equal(db.pragma("freelist_count", { simple: true }), 0, "no free page left in the file");
    const after = db.pragma("page_count", { simple: true }) as number;
    assert.ok(after < pages / 10, `the file shrank from ${pages} to ${after} pages`);
    assert.equal(samples.stats().pending_snapshots, 10);
  });
});

test("the nightly checkpoint empties sitegate.db's WAL file, and folds telemetry's WAL into its file at the same size", async () => {
  await withStore(({ storage, samples, maintenance, dir }) => {
    const wal = join(dir, `${TELEMETRY_DB_FILE}-wal`);
    const mainWal = join(dir, `${DB_FILE}-wal`);
    const size = statSync(wal).size;
    assert.equal(size, walBytes(1100, 1024), "telemetry's WAL has its working size from the start");
    for (let i = 0; i < 200; i++) samples.append(snapshot(i, 10));
    // The first night's PRAGMA optimize may write fresh planner statistics after the
    // checkpoint (ANALYZE of new tables); from then on the WAL ends each night empty.
    maintenance.checkpoint();
    storage.db.exec("CREATE TABLE IF NOT EXISTS scratch (x)");
    for (let i = 200; i < 260; i++) samples.append(snapshot(i, 10));
    assert.ok(existsSync(mainWal) && statSync(mainWal).size > 0, "writes went to sitegate.db's WAL");
    maintenance.checkpoint();
    assert.equal(statSync(mainWal).size, 0, "sitegate.db's WAL was truncated");
    assert.equal(statSync(wal).size, size, "telemetry's WAL keeps its blocks");
    // Every row is in telemetry.db itself: a copy of the file without its WAL holds them all.
    const copy = join(dir, "copy");
    mkdirSync(copy);
    copyFileSync(join(dir, TELEMETRY_DB_FILE), join(copy, TELEMETRY_DB_FILE));
    const alone = new Database(join(copy, TELEMETRY_DB_FILE), { readonly: true });
    assert.equal(alone.prepare("SELECT count(*) FROM tm_snapshot").pluck().get(), 260);
    alone.close();
    // The next commits write from the WAL's start again, over the same blocks.
    for (let i = 260; i < 300; i++) samples.append(snapshot(i, 10));
    assert.equal(statSync(wal).size, size);
    assert.equal(storage.telemetryDb.prepare("SELECT count(*) FROM tm_snapshot").pluck().get(), 300);
    assert.equal(storage.telemetryDb.pragma("integrity_check", { simple: true }), "ok");
  });
});
