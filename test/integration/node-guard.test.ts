// Every entry point refuses a Node.js other than the release's own with one line and exit 1:
// a native addon built for Node 24 crashed a Node 20 process silently (exit 139).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { delimiter, join, resolve } from "node:path";
import { CLI } from "../support/cli.js";
import { withTmpDir } from "../support/tmp.js";
import { unsupportedNode } from "../../src/node-guard.js";

const SIM_CLI = resolve(CLI, "../../hw-sim/cli.js");

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
  });
}

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
