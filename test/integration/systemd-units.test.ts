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
    assert.equal(r.status, 0, `${u}: ${r.stderr}`);
    assert.equal(r.stderr.trim(), "", `${u} has warnings: ${r.stderr}`);
  }
});

test("the gateway unit is hardened: own user, dialout, strict filesystem, state dir, restart", () => {
  const text = readFileSync(join(dir, "sitegate.service"), "utf8");
  for (const line of ["User=sitegate", "SupplementaryGroups=dialout", "ProtectSystem=strict", "StateDirectory=sitegate", "Restart=always", "NoNewPrivileges=yes"]) {
    assert.ok(text.split("\n").includes(line), `missing ${line}`);
  }
});
