// The power-cut filesystem itself (test/support/powercut-fs.py): a cut keeps what was
// fsynced and drops the rest, file data and directory entries alike, and SQLite on it
// keeps a transaction committed with synchronous = FULL and loses one committed with OFF.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  closeSync,
  existsSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  unlinkSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { withTmpDir } from "../support/tmp.js";
import { mountPowercut, powercutUnavailable, type PowercutMount } from "../support/powercut-mount.js";

const noFuse = !existsSync("/dev/fuse") ? "this machine has no /dev/fuse" : false;

/** fsync of a directory (a new, renamed or removed name becomes durable). */
function syncDir(dir: string): void {
  const fd = openSync(dir, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** The filesystem over dir/disk for fn, always unmounted (cut) before the temp dir goes. */
async function withMount<T>(dir: string, fn: (m: PowercutMount) => Promise<T>): Promise<T> {
  const m = await mountPowercut(join(dir, "disk"), join(dir, "mnt"), join(dir, "fs"));
  try {
    return await fn(m);
  } finally {
    await m.cut();
  }
}

test("a cut keeps fsynced data and names and drops every write, create, rename and unlink after them", { skip: noFuse }, async () => {
  assert.equal(powercutUnavailable(), null);
  await withTmpDir(async (dir) => {
    const disk = join(dir, "disk");
    mkdirSync(disk);
    writeFileSync(join(disk, "old"), "old");
    const stats = await withMount(dir, async (m) => {
      const at = (n: string) => join(m.mountpoint, n);
      const a = openSync(at("a"), "w");
      writeSync(a, "synced");
      fsyncSync(a);
      syncDir(m.mountpoint);
      writeSync(a, " and lost");
      closeSync(a);
      // fsynced itself, but its name was never synced: gone, as POSIX allows
      const b = openSync(at("b"), "w");
      writeSync(b, "b");
      fsyncSync(b);
      closeSync(b);
      unlinkSync(at("old"));
      const c = openSync(at("c"), "w");
      writeSync(c, "c");
      fsyncSync(c);
      closeSync(c);
      renameSync(at("c"), at("a2"));
      assert.equal(readFileSync(at("a"), "utf8"), "synced and lost", "the mount shows every write before the cut");
      return m.cut();
    });
    assert.equal(readFileSync(join(disk, "a"), "utf8"), "synced");
    assert.ok(!existsSync(join(disk, "b")), "a name not synced is dropped");
    assert.equal(readFileSync(join(disk, "old"), "utf8"), "old", "an unlink not synced is undone");
    assert.ok(!existsSync(join(disk, "a2")) && !existsSync(join(disk, "c")), "c was never a durable name");
    assert.ok(stats.dropped_writes >= 1 && stats.dropped_names >= 4, JSON.stringify(stats));
  });
});

test("SQLite in WAL mode on it: a commit with synchronous = FULL survives a cut, one with OFF does not", { skip: noFuse }, async () => {
  await withTmpDir(async (dir) => {
    await withMount(dir, async (m) => {
      const db = new Database(join(m.mountpoint, "x.db"));
      db.pragma("journal_mode = WAL");
      db.pragma("synchronous = FULL");
      db.exec("CREATE TABLE t (x INTEGER)");
      db.prepare("INSERT INTO t VALUES (1)").run();
      db.pragma("synchronous = OFF");
      db.prepare("INSERT INTO t VALUES (2)").run();
      assert.deepEqual(db.prepare("SELECT x FROM t").pluck().all(), [1, 2]);
      db.close();
    });
    const after = new Database(join(dir, "disk", "x.db"));
    try {
      assert.equal(after.pragma("integrity_check", { simple: true }), "ok");
      assert.deepEqual(after.prepare("SELECT x FROM t").pluck().all(), [1]);
    } finally {
      after.close();
    }
  });
});
