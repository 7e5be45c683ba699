// Each durable commit, the first of a connection too, fsyncs sitegate.db-wal before it
// returns: a fleet nonce, a device configuration, a token, a revocation, each followed by
// a marker written to stdout, in a process traced by strace. (SQLite applies `PRAGMA
// synchronous` when the statement is prepared: cached FULL and NORMAL statements once
// left the first FULL commit of each connection unsynced.)
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { withTmpDir } from "../support/tmp.js";
import { STRACE_FLAGS, mainThreadCalls, syncedBefore, wroteToFd } from "../support/strace.js";

const SRC = resolve(fileURLToPath(import.meta.url), "../../../src");
const STEPS = ["nonce", "configure", "token", "revoke"];

test("a nonce, a configuration, a token and a revocation are each fsynced before the commit returns, the first one too", async () => {
  assert.equal(spawnSync("strace", ["-V"]).status, 0, "strace is installed (make deps installs it)");
  await withTmpDir((dir) => {
    const script = join(dir, "steps.mjs");
    writeFileSync(
      script,
      `import { writeSync } from "node:fs";
import { StoragePart } from "${SRC}/storage/part.js";
import { ALL_MIGRATIONS } from "${SRC}/daemon.js";
import { silentLogger } from "${SRC}/log.js";
import { NonceStore } from "${SRC}/fleet/nonces.js";
import { DeviceRegistry } from "${SRC}/modbus/device/registry.js";
import { TokenStore, revokeTokens } from "${SRC}/api/auth.js";
const storage = new StoragePart(${JSON.stringify(join(dir, "data"))}, ALL_MIGRATIONS, silentLogger());
storage.start();
const registry = new DeviceRegistry(storage);
registry.start();
const mark = (s) => writeSync(1, "step " + s + "\\n");
// Steady state first: a fresh database's first commits after the migrations checkpoint
// (and so fsync) on their own; a running gateway's commits do not.
storage.db.pragma("wal_checkpoint(TRUNCATE)");
for (let i = 0; i < 3; i++) registry.markConfigApplied("warm-" + i, "h");
new NonceStore(storage).claimNonce("n0123456789abcdef", Date.now() + 60000, Date.now());
mark("nonce");
registry.put({ device_id: "battery-1" }, null, true);
mark("configure");
new TokenStore(storage.db, 3600, Date.now, () => "fp").issue("partner");
mark("token");
revokeTokens(storage.db);
mark("revoke");
storage.stop();
`,
    );
    const trace = join(dir, "steps.trace");
    const r = spawnSync("strace", [...STRACE_FLAGS, "-o", trace, process.execPath, script], { encoding: "utf8" });
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout, STEPS.map((s) => `step ${s}\n`).join(""));
    const calls = mainThreadCalls(trace);
    const marks = calls.flatMap((c, i) => (wroteToFd(c, 1) ? [i] : []));
    assert.equal(marks.length, STEPS.length);
    let previous = -1;
    marks.forEach((at, n) => {
      const { lastWalWrite, synced } = syncedBefore(calls, at, "/sitegate.db-wal");
      assert.ok(lastWalWrite > previous, `${STEPS[n]}: committed to the WAL`);
      assert.ok(synced, `${STEPS[n]}: the WAL fsynced before the commit returned`);
      previous = at;
    });
  });
});
