import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, chownSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { migrate, openDatabase, DB_FILE } from "../../src/storage/db.js";
import { isSitegateError } from "../../src/errors.js";
import { withTmpDir } from "../support/tmp.js";
import { traversableRelease } from "../support/traversable-release.js";

const mods = [
  {
    module: "alpha",
    migrations: [
      { version: 1, sql: "CREATE TABLE a (x INTEGER)" },
      { version: 2, sql: "ALTER TABLE a ADD COLUMN y TEXT" },
    ],
  },
  { module: "beta", migrations: [{ version: 1, sql: "CREATE TABLE b (z INTEGER)" }] },
];

test("migrations run once, in order, per module, and are recorded", async () => {
  await withTmpDir((dir) => {
    const db = openDatabase(dir);
    assert.equal(migrate(db, mods), 3);
    assert.equal(migrate(db, mods), 0, "a second run applies nothing");
    db.prepare("INSERT INTO a (x, y) VALUES (1, 'one')").run();
    const rows = db.prepare("SELECT module, version FROM schema_migrations ORDER BY module, version").all();
    assert.deepEqual(rows, [
      { module: "alpha", version: 1 },
      { module: "alpha", version: 2 },
      { module: "beta", version: 1 },
    ]);
    db.close();
    // A later release adds migration 3 to alpha: only it runs, data stays.
    const db2 = openDatabase(dir);
    const more = [{ module: "alpha", migrations: [...mods[0].migrations, { version: 3, sql: "CREATE INDEX a_x ON a (x)" }] }];
    assert.equal(migrate(db2, more), 1);
    assert.equal((db2.prepare("SELECT y FROM a").get() as { y: string }).y, "one");
    db2.close();
  });
});

test("a failing migration rolls back and is not recorded", async () => {
  await withTmpDir((dir) => {
    const db = openDatabase(dir);
    const bad = [
      {
        module: "gamma",
        migrations: [
          { version: 1, sql: "CREATE TABLE g (x INTEGER)" },
          { version: 2, sql: "CREATE TABLE g2 (x INTEGER); INSERT INTO nowhere VALUES (1)" },
        ],
      },
    ];
    assert.throws(() => migrate(db, bad), /no such table: nowhere/);
    const tables = db.prepare("SELECT name FROM sqlite_master WHERE type='table' AND name LIKE 'g%'").pluck().all();
    assert.deepEqual(tables, ["g"], "migration 2's table was rolled back");
    assert.deepEqual(db.prepare("SELECT version FROM schema_migrations WHERE module='gamma'").pluck().all(), [1]);
    db.close();
  });
});

test("migrations must be numbered 1..n", async () => {
  await withTmpDir((dir) => {
    const db = openDatabase(dir);
    assert.throws(() => migrate(db, [{ module: "m", migrations: [{ version: 2, sql: "SELECT 1" }] }]), /numbered 1..n/);
    db.close();
  });
});

test("the database is opened in WAL mode with incremental auto-vacuum", async () => {
  await withTmpDir((dir) => {
    const db = openDatabase(dir);
    assert.equal(db.pragma("journal_mode", { simple: true }), "wal");
    assert.equal(db.pragma("auto_vacuum", { simple: true }), 2);
    db.close();
  });
});

/** The user an unprivileged child runs as when the tests run as root (root can write anywhere). */
const NOBODY = 65534;

/**
 * openDatabase(dataDir) in a child node process as `nobody` (spawn's uid/gid), run from a
 * copy of the release in `dir` (the checkout may be where nobody cannot go): the error code
 * and message it got, or "opened".
 */
function openAsNobody(dir: string, dataDir: string): { code: string; message: string } {
  const release = traversableRelease(dir);
  const db = pathToFileURL(join(release.dist, "storage", "db.js")).href;
  const script = `import(${JSON.stringify(db)}).then((m) => { try { m.openDatabase(process.argv[1]).close(); console.log(JSON.stringify({ code: "opened", message: "" })); } catch (e) { console.log(JSON.stringify({ code: e.code ?? "?", message: e.message })); } });`;
  const r = spawnSync(release.node, ["--input-type=module", "-e", script, dataDir], { uid: NOBODY, gid: NOBODY, encoding: "utf8" });
  assert.equal(r.status, 0, `child as nobody: ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split("\n").at(-1)!);
}

test("an unwritable data_dir is a clear STORAGE_UNAVAILABLE error naming the path", async () => {
  await withTmpDir((dir) => {
    const ro = join(dir, "ro");
    mkdirSync(ro);
    chmodSync(ro, 0o555);
    if (process.getuid?.() === 0) {
      // As root the check would pass; run it where it means something, as another user.
      chmodSync(dir, 0o755);
      const r = openAsNobody(dir, ro);
      assert.equal(r.code, "STORAGE_UNAVAILABLE", r.message);
      assert.ok(r.message.includes(ro), r.message);
      // The same child opens a directory it may write: the failure above is the permission.
      const rw = join(dir, "rw");
      mkdirSync(rw);
      chownSync(rw, NOBODY, NOBODY);
      assert.equal(openAsNobody(dir, rw).code, "opened");
    } else {
      assert.throws(
        () => openDatabase(ro),
        (e) => isSitegateError(e, "STORAGE_UNAVAILABLE") && e.message.includes(ro),
      );
    }
  });
});

test("a data_dir that is a file is a clear STORAGE_UNAVAILABLE error naming the path", async () => {
  await withTmpDir((dir) => {
    const file = join(dir, "afile");
    writeFileSync(file, "x");
    assert.throws(
      () => openDatabase(join(file, "sub")),
      (e) => isSitegateError(e, "STORAGE_UNAVAILABLE") && e.message.includes(file),
    );
  });
});

test("a corrupt database file is a clear STORAGE_CORRUPT error naming the path", async () => {
  await withTmpDir((dir) => {
    writeFileSync(join(dir, DB_FILE), Buffer.alloc(8192, 0x5a));
    assert.throws(
      () => openDatabase(dir),
      (e) => isSitegateError(e, "STORAGE_CORRUPT") && e.message.includes(join(dir, DB_FILE)),
    );
  });
});

test("the dispatch timeline's move to a rowid table keeps every event and its first spelling, and upserts on event_id", async () => {
  const { DISPATCH_MIGRATIONS } = await import("../../src/dispatch/store.js");
  const { EventStore } = await import("../../src/dispatch/store.js");
  await withTmpDir(async (dir) => {
    const db = openDatabase(dir);
    try {
      migrate(db, [{ module: "dispatch", migrations: DISPATCH_MIGRATIONS.migrations.filter((m) => m.version <= 3) }]);
      const ins = db.prepare(
        "INSERT INTO dp_event (event_id, spec, content_hash, source, start_ms, end_ms, state, receipt, created_at, updated_at) VALUES (?, ?, 'h', 'partner', ?, ?, ?, 'accepted', 1, 1)",
      );
      ins.run(
        "b0000000-0000-4000-8000-000000000002",
        JSON.stringify({ event_id: "B0000000-0000-4000-8000-000000000002", source: "partner", start_ms: 2, end_ms: 3 }),
        2,
        3,
        "scheduled",
      );
      ins.run(
        "a0000000-0000-4000-8000-000000000001",
        JSON.stringify({ event_id: "a0000000-0000-4000-8000-000000000001", source: "partner", start_ms: 1, end_ms: 2 }),
        1,
        2,
        "done",
      );
      const upTo5 = { module: "dispatch", migrations: DISPATCH_MIGRATIONS.migrations.filter((m) => m.version <= 5) };
      assert.equal(migrate(db, [upTo5]), 2, "only the rowid move and the open-events index run");
      const cols = (db.prepare("PRAGMA table_info(dp_event)").all() as Array<{ name: string }>).map((c) => c.name);
      assert.equal(cols[0], "id");
      const store = new EventStore(db);
      assert.equal(
        store.get("B0000000-0000-4000-8000-000000000002")?.spec.event_id,
        "B0000000-0000-4000-8000-000000000002",
        "first spelling kept",
      );
      assert.equal(store.get("a0000000-0000-4000-8000-000000000001")?.state, "done");
      const row = store.get("b0000000-0000-4000-8000-000000000002")!;
      store.put({ ...row, state: "cancelled" });
      assert.equal(db.prepare("SELECT count(*) FROM dp_event").pluck().get(), 2, "an update stays one row per event_id");
      assert.equal(store.get("b0000000-0000-4000-8000-000000000002")?.state, "cancelled");
    } finally {
      db.close();
    }
  });
});
