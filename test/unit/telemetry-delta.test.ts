// The delta codec (src/telemetry/delta-codec.ts) and the sample store's rows packed against
// each other: exact round trips whatever the values, a value that did not change costs a
// bit, and the store reads, resumes, deletes and drops by whole commits.
import { test } from "node:test";
import assert from "node:assert/strict";
import { packSnapshot, unpackSnapshot, type PackedSample } from "../../src/telemetry/delta-codec.js";
import { packSamples } from "../../src/telemetry/sample-codec.js";
import { StoragePart } from "../../src/storage/part.js";
import { SAMPLE_MIGRATIONS, SampleStore } from "../../src/telemetry/sample-store.js";
import { silentLogger } from "../../src/log.js";
import { withTmpDir } from "../support/tmp.js";
import type { Snapshot } from "../../src/telemetry/types.js";

const ODD = [
  0,
  1,
  -1,
  2000,
  -4975,
  65535,
  4294967295,
  2 ** 50,
  -(2 ** 52),
  229.7,
  49.99,
  0.1,
  -0.5,
  12.345678,
  Math.PI,
  1e-9,
  1.5e300,
  -0,
  NaN,
  Infinity,
  -Infinity,
  Number.MAX_SAFE_INTEGER,
  3.4028234663852886e38,
  -1959.854,
  1e21,
];

function same(a: readonly PackedSample[], b: readonly PackedSample[]): void {
  assert.equal(a.length, b.length);
  a.forEach((s, i) => {
    assert.equal(s.series, b[i].series);
    assert.ok(Object.is(s.value, b[i].value), `series ${s.series}: ${b[i].value} came back as ${s.value}`);
  });
}

test("every value round-trips exactly, alone and against any previous value", () => {
  const alone = ODD.map((value, i) => ({ series: i * 37 + 1, value }));
  same(unpackSnapshot(packSnapshot(alone)), alone);
  // Every value against every other value as its predecessor (same series list: the bitmap path).
  for (const prev of ODD) {
    const before = ODD.map((_, i) => ({ series: i + 1, value: prev }));
    const now = ODD.map((value, i) => ({ series: i + 1, value }));
    same(unpackSnapshot(packSnapshot(now, before), before), now);
  }
  // A different series list: new, gone and reordered series, against the values before.
  const before = ODD.map((value, i) => ({ series: i + 1, value }));
  const now = [...ODD].reverse().map((value, i) => ({ series: (i * 7) % 40, value: value * 1.5 }));
  same(unpackSnapshot(packSnapshot(now, before), before), now);
});

test("random walks of meter-like values round-trip exactly", () => {
  let seed = 7;
  const rnd = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  let prev: PackedSample[] | null = null;
  let cur = Array.from({ length: 30 }, (_, i) => ({ series: i + 1, value: Math.round(rnd() * 5000 * 1000) / 1000 }));
  for (let step = 0; step < 500; step++) {
    same(unpackSnapshot(packSnapshot(cur, prev), prev), cur);
    prev = cur;
    cur = cur.map((s, i) => ({
      series: s.series,
      value: i % 3 === 0 ? s.value : i % 3 === 1 ? Math.round((s.value + (rnd() - 0.5) * 40) * 10) / 10 : Math.fround(s.value + rnd()),
    }));
  }
});

test("an unchanged value costs a bit; a small change two bytes; deltas beat packing alone", () => {
  const before = Array.from({ length: 40 }, (_, i) => ({ series: i + 1, value: 1000 + i * 12.5 }));
  assert.equal(packSnapshot(before, before).length, 1 + 5, "the header and a 40-bit bitmap");
  const now = before.map((s, i) => (i === 3 ? { ...s, value: s.value + 5.3 } : s));
  assert.equal(packSnapshot(now, before).length, 1 + 5 + 2);
  assert.ok(packSnapshot(now, before).length * 10 < packSamples(now).length, "a tenth of the same snapshot packed alone");
});

test("damaged records are errors, not wrong values", () => {
  const s = [
    { series: 1, value: 123456789 },
    { series: 2, value: 229.7 },
  ];
  const buf = packSnapshot(s);
  assert.throws(() => unpackSnapshot(buf.subarray(0, buf.length - 1)), /truncated/);
  assert.throws(() => unpackSnapshot(Buffer.concat([buf, Buffer.from([0])])), /trailing/);
  assert.throws(() => unpackSnapshot(packSnapshot(s, s)), /without the snapshot before it/);
});

function withStore(commitIntervalMs: number, fn: (r: { storage: StoragePart; samples: SampleStore }) => void): Promise<void> {
  return withTmpDir((dir) => {
    const log = silentLogger();
    const storage = new StoragePart(dir, [SAMPLE_MIGRATIONS], log);
    const samples = new SampleStore(storage, { retentionBytes: 64 * 1024 * 1024, log, commitIntervalMs });
    storage.start();
    samples.start();
    try {
      fn({ storage, samples });
    } finally {
      samples.stop();
      storage.stop();
    }
  });
}

const snap = (i: number): Snapshot => ({
  ts: 1_700_000_000_000 + i * 1000,
  devices: [
    { device_id: "meter", metrics: { power_w: 1000 + (i % 7) * 3.5, energy_import_wh: 5000 + Math.floor(i / 10) } },
    { device_id: "battery", metrics: { soc_pct: 50, power_w: -2000 + (i % 3) } },
  ],
});

test("held snapshots are readable at once; one commit packs them against each other; reads resume mid-commit", async () => {
  await withStore(10_000, ({ storage, samples }) => {
    for (let i = 0; i < 25; i++) samples.append(snap(i));
    const db = storage.telemetryDb;
    assert.equal(db.prepare("SELECT count(*) FROM tm_snapshot").pluck().get(), 0, "held in memory until the interval ends");
    const early = samples.pending(100);
    assert.deepEqual(
      early.map((s) => s.id),
      Array.from({ length: 25 }, (_, i) => i + 1),
      "the readers see them before the commit",
    );
    samples.flush();
    const rows = db.prepare("SELECT id, base, cursor FROM tm_snapshot ORDER BY id").all() as Array<{
      id: number;
      base: number;
      cursor: number | null;
    }>;
    assert.equal(rows.length, 25);
    assert.ok(
      rows.every((r) => r.base === 1),
      "one key row, every other row packed against the one before it",
    );
    for (let i = 25; i < 40; i++) samples.append(snap(i));
    samples.flush();
    // Read page by page from any point: the same snapshots as appended.
    for (const from of [0, 3, 24, 25, 31]) {
      const got: number[] = [];
      let after = from;
      for (let page = samples.pending(4, after); page.length; page = samples.pending(4, after)) {
        for (const s of page) {
          assert.deepEqual(s.devices, snap(s.id - 1).devices, `snapshot ${s.id} read from ${from}`);
          assert.equal(s.ts, snap(s.id - 1).ts);
          got.push(s.id);
        }
        after = page[page.length - 1].id;
      }
      assert.deepEqual(
        got,
        Array.from({ length: 40 - from }, (_, i) => from + i + 1),
      );
    }
    assert.ok(
      samples.stats().stored_bytes_total * 2 < samples.stats().stored_alone_bytes_total,
      "deltas take less than half of packing each alone",
    );
  });
});

test("the cursor rides in the last row of a commit; deletes never orphan a delta row; ids are never reused", async () => {
  await withTmpDir((dir) => {
    const log = silentLogger();
    const open = () => {
      const storage = new StoragePart(dir, [SAMPLE_MIGRATIONS], log);
      const samples = new SampleStore(storage, { retentionBytes: 64 * 1024 * 1024, log, commitIntervalMs: 10_000 });
      storage.start();
      samples.start();
      return { storage, samples, push: samples.consumer("push", { inRow: true }) };
    };
    let { storage, samples, push } = open();
    for (let i = 0; i < 10; i++) samples.append(snap(i));
    samples.flush(); // rows 1..10, key row 1
    push.settleThrough(7);
    for (let i = 10; i < 20; i++) samples.append(snap(i));
    samples.flush(); // rows 11..20, key row 11, cursor 7 in row 20
    const db = storage.telemetryDb;
    assert.equal(db.prepare("SELECT cursor FROM tm_snapshot WHERE id = 20").pluck().get(), 7);
    samples.persistCursor();
    assert.equal(db.prepare("SELECT min(id) FROM tm_snapshot").pluck().get(), 1, "rows 8..10 still need key row 1: nothing deleted");
    push.settleThrough(15);
    samples.persistCursor();
    assert.equal(
      db.prepare("SELECT min(id) FROM tm_snapshot").pluck().get(),
      11,
      "the first commit went whole; the second waits for its key row's readers",
    );
    assert.deepEqual(
      samples.pending(100).map((s) => s.id),
      [16, 17, 18, 19, 20],
    );
    push.settleThrough(20);
    samples.persistCursor();
    assert.equal(db.prepare("SELECT count(*) FROM tm_snapshot").pluck().get(), 0);
    // A crash (no stop): the cursor and the last id come back from the state and the rows.
    storage.stop();
    ({ storage, samples, push } = open());
    assert.equal(push.through, 20);
    samples.append(snap(20));
    assert.deepEqual(
      samples.pending(10).map((s) => s.id),
      [21],
      "id 21, never an id used before",
    );
    samples.stop();
    storage.stop();
  });
});

test("telemetry from a release before telemetry.db moves over once, with its ids and cursor", async () => {
  await withTmpDir(async (dir) => {
    const { openDatabase, migrate } = await import("../../src/storage/db.js");
    const { packSamples: packV1 } = await import("../../src/telemetry/sample-codec.js");
    // sitegate.db as the release before left it: telemetry schema 1 with rows and a cursor.
    const old = openDatabase(dir);
    migrate(old, [{ module: "telemetry", migrations: [SAMPLE_MIGRATIONS.migrations[0]] }]);
    old.prepare("INSERT INTO tm_series (id, device_id, metric) VALUES (1, 'grid', 'power_w')").run();
    for (let id = 1; id <= 5; id++)
      old
        .prepare("INSERT INTO tm_snapshot (id, ts, n, data) VALUES (?, ?, 1, ?)")
        .run(id, 1000 * id, packV1([{ series: 1, value: id * 100.5 }]));
    old.prepare("UPDATE tm_state SET value = 2 WHERE key = 'push_cursor'").run();
    old.close();
    const log = silentLogger();
    const storage = new StoragePart(dir, [SAMPLE_MIGRATIONS], log);
    const samples = new SampleStore(storage, { retentionBytes: 1 << 26, log });
    storage.start();
    samples.start();
    try {
      assert.deepEqual(
        samples.pending(10).map((s) => [s.id, s.devices[0].metrics.power_w]),
        [
          [3, 301.5],
          [4, 402],
          [5, 502.5],
        ],
      );
      assert.equal(
        storage.db.prepare("SELECT count(*) FROM sqlite_schema WHERE name LIKE 'tm_%'").pluck().get(),
        0,
        "sitegate.db no longer holds telemetry",
      );
      samples.append(snap(0));
      assert.deepEqual(
        samples.pending(10).map((s) => s.id),
        [3, 4, 5, 6],
      );
    } finally {
      samples.stop();
      storage.stop();
    }
    // A rollback to such a release, which ran for a while: it made its tables again and
    // pushed some rows (cursor 2 of its own ids). Its unsent rows come after id 6.
    const again = openDatabase(dir);
    migrate(again, [{ module: "telemetry", migrations: [SAMPLE_MIGRATIONS.migrations[0]] }]);
    again.prepare("INSERT INTO tm_series (id, device_id, metric) VALUES (1, 'pv', 'power_w'), (2, 'grid', 'power_w')").run();
    for (let id = 1; id <= 4; id++)
      again.prepare("INSERT INTO tm_snapshot (id, ts, n, data) VALUES (?, ?, 2, ?)").run(
        id,
        9000 + id,
        packV1([
          { series: 1, value: id },
          { series: 2, value: -id },
        ]),
      );
    again.prepare("UPDATE tm_state SET value = 2 WHERE key = 'push_cursor'").run();
    again.close();
    const storage2 = new StoragePart(dir, [SAMPLE_MIGRATIONS], log);
    const samples2 = new SampleStore(storage2, { retentionBytes: 1 << 26, log });
    storage2.start();
    samples2.start();
    try {
      const got = samples2
        .pending(10)
        .map((s) => ({ id: s.id, ts: s.ts, devices: Object.fromEntries(s.devices.map((d) => [d.device_id, d.metrics.power_w])) }));
      assert.deepEqual(
        got.map((g) => g.id),
        [3, 4, 5, 6, 7, 8],
        "the unsent rows of the rollback release after the newest id",
      );
      assert.deepEqual(
        got.slice(-2),
        [
          { id: 7, ts: 9003, devices: { pv: 3, grid: -3 } },
          { id: 8, ts: 9004, devices: { pv: 4, grid: -4 } },
        ],
        "series matched by name",
      );
      assert.equal(storage2.db.prepare("SELECT count(*) FROM sqlite_schema WHERE name LIKE 'tm_%'").pluck().get(), 0);
    } finally {
      samples2.stop();
      storage2.stop();
    }
  });
});

test("a reader right behind the writer gets the last commit from memory: what SQLite gives after a restart, nothing deleted", async () => {
  for (const commitIntervalMs of [undefined, 10_000]) {
    await withTmpDir((dir) => {
      const log = silentLogger();
      const open = () => {
        const storage = new StoragePart(dir, [SAMPLE_MIGRATIONS], log);
        const samples = new SampleStore(storage, { retentionBytes: 64 * 1024 * 1024, log, commitIntervalMs });
        storage.start();
        samples.start();
        return { storage, samples, push: samples.consumer("push", { inRow: true }) };
      };
      let { storage, samples, push } = open();
      for (let i = 0; i < 6; i++) samples.append(snap(i));
      samples.flush();
      for (let i = 6; i < 12; i++) samples.append(snap(i));
      samples.flush();
      const afters = [0, 5, 6, 7, 11];
      const warm = afters.map((a) => samples.pending(100, a));
      for (const [k, got] of warm.entries()) {
        assert.deepEqual(
          got.map((s) => s.id),
          Array.from({ length: 12 - afters[k] }, (_, i) => afters[k] + i + 1),
        );
        for (const s of got) assert.deepEqual(s.devices, snap(s.id - 1).devices, `snapshot ${s.id}`);
      }
      storage.stop(); // a crash: the next start reads SQLite alone
      ({ storage, samples, push } = open());
      assert.deepEqual(
        afters.map((a) => samples.pending(100, a)),
        warm,
        `commit interval ${commitIntervalMs ?? "at once"}: memory and SQLite agree`,
      );
      samples.append(snap(12));
      samples.flush();
      push.settleThrough(13);
      samples.persistCursor();
      for (const a of [0, 12]) assert.deepEqual(samples.pending(100, a), [], `rows deleted are not read from memory either (after ${a})`);
      samples.stop();
      storage.stop();
    });
  }
});
