// telemetry.db's WAL on the card (src/storage/db.ts preallocateWal): it has its working size
// from the start, so a commit overwrites blocks the file has and never changes its size or
// block map (no file-system metadata written per commit); it wraps at the checkpoint
// without growing; and the zeros after the last commit are no frame, so a crash image
// (the files as they are while the daemon holds them) opens with every committed row.
import { test } from "node:test";
import assert from "node:assert/strict";
import { copyFileSync, mkdirSync, statSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { StoragePart } from "../../src/storage/part.js";
import { SAMPLE_MIGRATIONS, SampleStore } from "../../src/telemetry/sample-store.js";
import { TELEMETRY_DB_FILE, walBytes } from "../../src/storage/db.js";
import { silentLogger } from "../../src/log.js";
import { snapshot } from "../support/uplink-harness.js";
import { withTmpDir } from "../support/tmp.js";

/** The files as a power cut would leave them now (the daemon holds them exclusively: no -shm). */
function crashImage(dir: string, to: string): Database.Database {
  mkdirSync(to);
  for (const f of [TELEMETRY_DB_FILE, `${TELEMETRY_DB_FILE}-wal`]) copyFileSync(join(dir, f), join(to, f));
  return new Database(join(to, TELEMETRY_DB_FILE));
}

test("telemetry's WAL keeps its size through commits and a checkpoint's wrap, and a crash image holds every commit", async () => {
  await withTmpDir((dir) => {
    const log = silentLogger();
    const storage = new StoragePart(dir, [SAMPLE_MIGRATIONS], log);
    const samples = new SampleStore(storage, { retentionBytes: 64 * 1024 * 1024, log });
    storage.start();
    samples.start();
    const wal = join(dir, `${TELEMETRY_DB_FILE}-wal`);
    const main = join(dir, TELEMETRY_DB_FILE);
    try {
      const size = statSync(wal).size;
      assert.equal(size, walBytes(1100, 1024), "the checkpoint threshold (1,000 frames of 1 KiB) and a tenth more, from the start");
      const mainBefore = statSync(main).size;
      const sizes = new Set<number>();
      // A commit per snapshot (no commit interval), each of a few frames, until a checkpoint
      // has written rows into telemetry.db (the WAL wraps), and 100 commits more.
      let n = 0;
      let wrappedAt = 0;
      while (n < wrappedAt + 100 || wrappedAt === 0) {
        samples.append(snapshot(n++, 10));
        sizes.add(statSync(wal).size);
        if (wrappedAt === 0 && statSync(main).size > mainBefore) wrappedAt = n;
        assert.ok(n < 5000, "no checkpoint in 5,000 commits");
      }
      assert.deepEqual([...sizes], [size], "no commit changed the WAL's size");
      const image = crashImage(dir, join(dir, "cut"));
      assert.equal(image.prepare("SELECT count(*) FROM tm_snapshot").pluck().get(), n, "every committed snapshot");
      assert.equal(image.pragma("integrity_check", { simple: true }), "ok");
      image.close();
    } finally {
      samples.stop();
      storage.stop();
    }
  });
});

test("a restart gives the WAL its working size again, and a crash image after it holds every commit", async () => {
  await withTmpDir((dir) => {
    const log = silentLogger();
    for (let run = 0; run < 2; run++) {
      const storage = new StoragePart(dir, [SAMPLE_MIGRATIONS], log);
      const samples = new SampleStore(storage, { retentionBytes: 64 * 1024 * 1024, log });
      storage.start();
      samples.start();
      try {
        assert.equal(statSync(join(dir, `${TELEMETRY_DB_FILE}-wal`)).size, walBytes(1100, 1024), `start ${run + 1}`);
        for (let i = 0; i < 5; i++) samples.append(snapshot(run * 5 + i, 4));
        const image = crashImage(dir, join(dir, `cut-${run}`));
        assert.equal(image.prepare("SELECT count(*) FROM tm_snapshot").pluck().get(), (run + 1) * 5);
        image.close();
      } finally {
        samples.stop();
        storage.stop();
      }
    }
  });
});
