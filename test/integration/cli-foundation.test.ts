// The `sitegate` binary as an installer runs it: check-config, hash-secret, run + SIGTERM.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { testConfigInput, TEST_PASSWORD } from "../support/config.js";
import { withTmpDir } from "../support/tmp.js";
import { exited, sitegate, spawnDaemon, writeConfig } from "../support/cli.js";
import { readDb } from "../support/db.js";
import { verifySecret } from "../../src/util/secret-hash.js";

test("check-config prints a summary and exits 0 for a valid file", async () => {
  await withTmpDir((dir) => {
    const file = writeConfig(dir, testConfigInput("./var"));
    const r = sitegate(["check-config", "--config", file]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /config ok/);
    assert.match(r.stdout, /site_id:\s+site-001/);
    assert.doesNotMatch(r.stdout, /scrypt\$/, "secrets are never printed");
  });
});

test("check-config lists every problem by path and exits 2", async () => {
  await withTmpDir((dir) => {
    const input = testConfigInput("./var") as Record<string, unknown>;
    (input.partner as Record<string, unknown>).data_push_url = "http://partner.example";
    delete (input as Record<string, unknown>).site_id;
    input.colour = "blue";
    const file = writeConfig(dir, input);
    const r = sitegate(["check-config", "--config", file]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /partner\.data_push_url: must be an https:\/\/ URL/);
    assert.match(r.stderr, /site_id: required/);
    assert.match(r.stderr, /colour: unknown key/);
  });
});

test("bad usage exits 2", () => {
  assert.equal(sitegate(["check-config", "--config", "/nonexistent/config.yaml"]).code, 2); // a missing config (the default is /etc/sitegate/config.yaml)
  assert.equal(sitegate(["frobnicate"]).code, 2);
  assert.equal(sitegate(["check-config", "--no-such-flag"]).code, 2);
});

test("hash-secret prints a hash that verifies the secret and no other", () => {
  const r = sitegate(["hash-secret"], `${TEST_PASSWORD}\n`);
  assert.equal(r.code, 0, r.stderr);
  const hash = r.stdout.trim().split("\n").at(-1)!;
  assert.match(hash, /^scrypt\$/);
  assert.ok(verifySecret(TEST_PASSWORD, hash));
  assert.ok(!verifySecret(TEST_PASSWORD + "x", hash));
  assert.equal(sitegate(["hash-secret"], "").code, 2, "an empty secret is refused");
});

// The stop is awaited as an event (the exit), bounded only by the test runner's timeout:
// a stop that hangs fails the test by timing out, a slow machine does not.
test("run starts, stops on SIGTERM with exit 0, and leaves a clean database", async () => {
  await withTmpDir(async (dir) => {
    const file = writeConfig(dir, { ...testConfigInput("./data"), log_level: "info" });
    const child = spawnDaemon(file, { stdio: "pipe", env: { LOG_FORMAT: "json", LOG_LEVEL: "info" } });
    let out = "";
    child.stdout!.on("data", (d) => (out += d));
    child.stderr!.on("data", (d) => (out += d));
    await new Promise<void>((res, rej) => {
      const check = () => (out.includes("gateway running") ? res() : undefined);
      child.stdout!.on("data", check);
      child.once("exit", (c) => rej(new Error(`exited early with ${c}: ${out}`)));
    });
    child.kill("SIGTERM");
    const code = await exited(child);
    assert.equal(code, 0, out);
    assert.match(out, /"msg":"stopped"/);
    const db = join(dir, "data", "sitegate.db");
    assert.ok(existsSync(db));
    assert.ok(!existsSync(db + "-wal") || statSync(db + "-wal").size === 0, "WAL was checkpointed");
    assert.equal(
      readDb(db, (check) => check.pragma("integrity_check", { simple: true })),
      "ok",
    );
  });
});

test("run exits 1 with the path named when data_dir is not usable", async () => {
  await withTmpDir((dir) => {
    const blocker = join(dir, "blocker");
    writeFileSync(blocker, "not a directory");
    const file = writeConfig(dir, testConfigInput(join(blocker, "data")));
    const r = sitegate(["run", "--config", file]);
    assert.equal(r.code, 1);
    assert.match(r.stdout + r.stderr, /blocker/);
  });
});
