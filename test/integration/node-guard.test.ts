// Every entry point refuses a Node.js other than the release's own with one line and exit 1:
// a native addon built for Node 24 crashed a Node 20 process silently (exit 139).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { delimiter, join, resolve } from "node:path";
import { CLI } from "../support/cli.js";
import { withTmpDir } from "../support/tmp.js";
import { runtimeHint, unsupportedNode } from "../../src/node-guard.js";

const SIM_CLI = resolve(CLI, "../../hw-sim/cli.js");
/** The checkout these compiled tests belong to (dist/src/cli.js is two folders below it). */
const ROOT = resolve(CLI, "../../..");

test("unsupportedNode accepts 24.21 and later 24s, and names the needed version otherwise", () => {
  assert.equal(unsupportedNode("24.21.0"), undefined);
  assert.equal(unsupportedNode("24.30.1"), undefined);
  for (const v of ["20.20.2", "22.23.3", "24.20.9", "25.0.0"])
    assert.match(unsupportedNode(v) ?? "", /needs Node\.js 24 \(>= 24\.21\.0\), not /);
});

/** The pinned runtime made to report another version before any module of ours loads. */
function runAs(version: string, script: string, args: string[]) {
  return withTmpDir((dir) => {
    const fake = join(dir, "fake-version.mjs");
    writeFileSync(
      fake,
      `Object.defineProperty(process, "versions", { value: { ...process.versions, node: ${JSON.stringify(version)} } });\n`,
    );
    return spawnSync(process.execPath, ["--import", fake, script, ...args], { encoding: "utf8" });
  });
}

for (const [name, script, args] of [
  ["sitegate run", CLI, ["run", "--config", "/nonexistent.yaml"]],
  ["sitegate --version", CLI, ["--version"]],
  ["sitegate-sim", SIM_CLI, ["--scenario", "/nonexistent.yaml"]],
] as const) {
  test(`${name} on Node 20 prints one line naming Node 24 and exits 1`, async () => {
    const r = await runAs("20.20.2", script, [...args]);
    assert.equal(r.status, 1, r.stderr);
    assert.equal(r.stdout, "");
    const lines = r.stderr.trim().split("\n");
    assert.equal(lines.length, 1, r.stderr);
    assert.match(lines[0] ?? "", /needs Node\.js 24 \(>= 24\.21\.0\), not 20\.20\.2/);
    // the exact runtime to use: this checkout's pinned one (the one running the tests)
    const pinned = join(ROOT, "var/runtime", `node-v${process.versions.node}-linux-${process.arch}`, "bin/node");
    assert.ok(lines[0]?.endsWith(`; run it on the checkout's runtime, ${pinned} (bin/sitegate runs the CLI on it)`), lines[0]);
  });
}

test("runtimeHint names a release's own runtime, a checkout's pinned one, or how to fetch it", () =>
  withTmpDir((dir) => {
    const touch = (f: string) => {
      mkdirSync(resolve(f, ".."), { recursive: true });
      writeFileSync(f, "");
    };
    // a release: <release>/node/bin/node beside <release>/dist
    const release = join(dir, "releases/0.2.0");
    touch(join(release, "node/bin/node"));
    touch(join(release, "dist/src/node-guard.js"));
    assert.equal(runtimeHint(join(release, "dist/src")), `run it on the release's own runtime, ${join(release, "node/bin/node")}`);
    // a checkout before `make setup-run`, then after it (the simulator's copy of the guard too)
    const clone = join(dir, "clone");
    touch(join(clone, "Makefile"));
    touch(join(clone, "package.json"));
    assert.equal(
      runtimeHint(join(clone, "hw-sim/dist/src"), "x64"),
      `run \`make setup-run build\` in ${clone} to fetch the pinned runtime into ${join(clone, "var/runtime")}, then bin/sitegate`,
    );
    touch(join(clone, "var/runtime/node-v24.21.0-linux-arm64/bin/node"));
    touch(join(clone, "var/runtime/node-v24.21.0-linux-x64/bin/node"));
    assert.equal(
      runtimeHint(join(clone, "dist/src"), "arm64"),
      `run it on the checkout's runtime, ${join(clone, "var/runtime/node-v24.21.0-linux-arm64/bin/node")} (bin/sitegate runs the CLI on it)`,
    );
  }));

test("a real Node.js of another version on this machine is refused the same way", (t) => {
  const other = (process.env.PATH ?? "")
    .split(delimiter)
    .map((d) => join(d, "node"))
    .find(
      (n) =>
        n !== process.execPath &&
        spawnSync(n, ["--version"], { encoding: "utf8" }).stdout?.startsWith("v2") &&
        !spawnSync(n, ["--version"], { encoding: "utf8" }).stdout.startsWith("v24."),
    );
  if (!other) {
    t.diagnostic("no Node.js other than 24 on PATH; the --import cases above cover the guard");
    return;
  }
  const r = spawnSync(other, [CLI, "run", "--config", "/nonexistent.yaml"], { encoding: "utf8" });
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stderr.trim(), /^sitegate: needs Node\.js 24 \(>= 24\.21\.0\), not \d+\.\d+\.\d+ /);
});
