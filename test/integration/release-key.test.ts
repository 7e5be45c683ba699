// The release key of a package: `make deb` refuses the development key `make bundle` generates
// unless DEV_UPDATE_KEY=1, and `sitegate --version` says when a box trusts such a key. The
// refusals come before any bundle is built, so these runs take well under a second.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { copyFileSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { withTmpDir } from "../support/tmp.js";
import { CLI } from "../support/ota.js";

const ROOT = resolve(fileURLToPath(import.meta.url), "../../../..");

function makeDeb(args: string[]) {
  const env = { ...process.env };
  delete env.DEV_UPDATE_KEY;
  return spawnSync("make", ["--no-print-directory", "deb", "DEB_ARCHS=x64", "NO_BUILD=1", ...args], { cwd: ROOT, encoding: "utf8", env });
}

const keygen = (out: string, ...more: string[]) =>
  spawnSync(process.execPath, [CLI, "update", "keygen", "--out", out, ...more], { encoding: "utf8" });

test("make deb without a release key refuses (exit 2): what a release key is, how to make one, and DEV_UPDATE_KEY=1", () => {
  const r = makeDeb([]);
  assert.equal(r.status, 2, r.stdout + r.stderr);
  const lines = r.stderr.split("\n");
  assert.equal(lines[0], "make deb: no release key (BUNDLE_KEY=path/to/release.key, its .pub beside it)");
  assert.match(r.stderr, /^ {2}A release key is the ed25519 pair that signs your update bundles; every controller .* trusts its \.pub\.$/m);
  const home = process.env.HOME ?? "";
  assert.ok(
    lines.includes(`  Make one once, and keep the .key off the build tree: bin/sitegate update keygen --out ${home}/sitegate-keys`),
    r.stderr,
  );
  assert.ok(lines.includes(`  then: make deb BUNDLE_KEY=${home}/sitegate-keys/sitegate-update.key`), r.stderr);
  assert.match(r.stderr, /^ {2}DEV_UPDATE_KEY=1 make deb builds a bench package with a development key instead/m);
  assert.doesNotMatch(r.stdout, /update bundle/, "nothing was built");
});

test("make deb refuses a key that keygen --development made, even when given as BUNDLE_KEY", async () => {
  await withTmpDir(async (dir) => {
    assert.equal(keygen(dir, "--development").status, 0);
    const r = makeDeb([`BUNDLE_KEY=${join(dir, "sitegate-update.key")}`]);
    assert.equal(r.status, 2, r.stdout + r.stderr);
    assert.match(r.stderr, new RegExp(`^make deb: no release key: ${join(dir, "sitegate-update.key")} is a development key$`, "m"));
    assert.match(r.stderr, /DEV_UPDATE_KEY=1 make deb builds a bench package/);
  });
});

test("build-deb.sh ships a development key only with DEV_UPDATE_KEY=1", async () => {
  await withTmpDir(async (dir) => {
    assert.equal(keygen(dir, "--development").status, 0);
    const env = { ...process.env };
    delete env.DEV_UPDATE_KEY;
    // refused at the key, before the bundle argument is even read
    const r = spawnSync(join(ROOT, "packaging/build-deb.sh"), ["x64", join(dir, "none.bundle"), join(dir, "sitegate-update.pub"), dir], {
      encoding: "utf8",
      env,
    });
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, /is a development key/);
  });
});

test("sitegate --version says when a trusted update key is a development key, and is one line otherwise", async () => {
  await withTmpDir(async (dir) => {
    assert.equal(keygen(join(dir, "dev"), "--development").status, 0);
    assert.equal(keygen(join(dir, "rel")).status, 0);
    const version = (keys: string) =>
      spawnSync(process.execPath, [CLI, "--version"], { encoding: "utf8", env: { ...process.env, SITEGATE_UPDATE_KEYS: keys } });
    let r = version(join(dir, "rel"));
    assert.equal(r.status, 0);
    assert.equal(r.stdout.trim().split("\n").length, 1, r.stdout);
    assert.doesNotMatch(readFileSync(join(dir, "rel", "sitegate-update.pub"), "utf8"), /development/);
    copyFileSync(join(dir, "dev", "sitegate-update.pub"), join(dir, "rel", "bench.pub"));
    r = version(join(dir, "rel"));
    assert.equal(r.status, 0);
    assert.match(r.stdout, /^sitegate \S+ node /);
    assert.match(r.stdout, new RegExp(`^update key: development \\(${join(dir, "rel", "bench.pub")}\\); not for a site$`, "m"));
  });
});

test("a marked development key still verifies bundles: PEM readers skip the mark", async () => {
  await withTmpDir(async (dir) => {
    assert.equal(keygen(dir, "--development").status, 0);
    const { loadTrustedKeys } = await import("../../src/update/bundle-format.js");
    assert.equal(loadTrustedKeys(dir).length, 1);
  });
});
