import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const dir = resolve(fileURLToPath(import.meta.url), "../../../../systemd");
const haveAnalyze = spawnSync("systemd-analyze", ["--version"]).status === 0;
const units = readdirSync(dir).filter((f) => f.endsWith(".service"));

test("every unit file passes systemd-analyze verify", { skip: !haveAnalyze && "systemd-analyze is not installed" }, () => {
  assert.ok(units.includes("sitegate.service"));
  for (const u of units) {
    const r = spawnSync("systemd-analyze", ["verify", join(dir, u)], { encoding: "utf8" });
    // The release's own runtime (/opt/sitegate/{current,previous}/node/bin/node) exists only
    // where the package is installed: test/integration/deb.test.ts verifies the installed units.
    const problems = r.stderr.split("\n").filter((l) => l.trim() && !/Command \/opt\/sitegate\/(current|previous)\/node\/bin\/node is not executable/.test(l));
    assert.deepEqual(problems, [], `${u}: ${r.stderr}`);
    if (problems.length === 0 && r.status !== 0) assert.match(r.stderr, /\/opt\/sitegate\//, `${u}: exit ${r.status}`);
  }
});

test("the gateway unit is hardened: own user, dialout, strict filesystem, state dir, restart", () => {
  const text = readFileSync(join(dir, "sitegate.service"), "utf8");
  for (const line of ["User=sitegate", "SupplementaryGroups=dialout", "ProtectSystem=strict", "StateDirectory=sitegate", "Restart=always", "NoNewPrivileges=yes"]) {
    assert.ok(text.split("\n").includes(line), `missing ${line}`);
  }
});
