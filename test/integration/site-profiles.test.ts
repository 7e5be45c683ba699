// profiles_dir: the site's own profiles load beside the built-ins; a file that does not
// parse, fails validation or takes a built-in's name is reported by its path and left
// out. check-config warns naming each and exits 0 (none is needed by a device); the daemon logs each at error and starts with
// the rest; a device may name a site profile.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Writable } from "node:stream";
import { siteProfiles } from "../../src/profiles/registry.js";
import { buildDaemon } from "../../src/daemon.js";
import { createLogger } from "../../src/log.js";
import { isSitegateError } from "../../src/errors.js";
import type { DeviceRegistry } from "../../src/modbus/device/registry.js";
import { testConfig, testConfigInput } from "../support/config.js";
import { runCli, writeConfig } from "../support/cli.js";
import { tcpDevice } from "../support/gateway.js";
import { withTmpDir } from "../support/tmp.js";

const GOOD = `name: site-battery
kind: fixed
role: battery
capabilities: [telemetry, charge, discharge]
identity:
  - { name: code, address: 0, expect: { values: [42] } }
points:
  - { metric: power_w, address: 10, type: s16 }
actions:
  charge: [{ address: 20, value: $watts }]
  discharge: [{ address: 21, value: $watts }]
  release: [{ address: 20, value: 0 }]
`;

/** A profiles folder with one good file and three broken ones; returns it and the broken files' paths. */
function profilesDir(root: string): { dir: string; broken: string[] } {
  const dir = join(root, "profiles");
  mkdirSync(dir);
  writeFileSync(join(dir, "good.yaml"), GOOD);
  const broken = [join(dir, "bad-yaml.yaml"), join(dir, "no-points.yaml"), join(dir, "takes-builtin.yaml")];
  writeFileSync(broken[0], "name: [unclosed\n");
  writeFileSync(broken[1], "name: nopoints\nkind: fixed\nrole: meter\n");
  writeFileSync(broken[2], GOOD.replace("site-battery", "sdm630"));
  return { dir, broken };
}

test("site profiles load beside the built-ins; each broken file is reported by its path and left out", async () => {
  await withTmpDir((root) => {
    const { dir, broken } = profilesDir(root);
    const r = siteProfiles(dir);
    assert.ok(r.has("site-battery"));
    assert.ok(r.has("sungrow-sh") && r.get("sdm630").kind === "fixed", "built-ins stay, sdm630 is still the built-in");
    assert.deepEqual(
      r.errors.map((e) => e.path),
      broken,
    );
    assert.match(r.errors[1].message, /points/);
    assert.match(r.errors[2].message, /"sdm630" is already taken/);
    assert.deepEqual(siteProfiles(join(root, "absent")).errors, [], "an absent folder: no site profiles, no error");
  });
});

test("check-config warns naming each broken profile file no device needs and exits 0; with only good ones it counts them", async () => {
  await withTmpDir(async (root) => {
    const { dir, broken } = profilesDir(root);
    const file = writeConfig(root, testConfigInput(join(root, "var"), { profiles_dir: dir }));
    const r = await runCli("check-config", "--config", file);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    for (const b of broken) assert.ok(r.stderr.includes(`warning: ${b}: site profile left out`), `${b} in: ${r.stderr}`);
    for (const b of broken.slice(1)) unlinkSync(b);
    writeFileSync(broken[0], GOOD.replace("site-battery", "site-battery-2"));
    const ok = await runCli("check-config", "--config", file);
    assert.equal(ok.code, 0, ok.stderr);
    assert.match(ok.stdout, /profiles: +\d+ built-in .*, 2 of the site/);
  });
});

test("the daemon logs each broken site profile at error and starts; a device may name a site profile", async () => {
  await withTmpDir(async (root) => {
    const { dir, broken } = profilesDir(root);
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _enc, cb) {
        lines.push(...String(chunk).split("\n").filter(Boolean));
        cb();
      },
    });
    const config = testConfig(join(root, "var"), { profiles_dir: dir, devices: [tcpDevice("b1", 1, 1, "site-battery") as never] });
    const daemon = buildDaemon(config, createLogger({ level: "error", destination: sink, pretty: false, journal: false }));
    await daemon.start();
    try {
      const errors = lines.map((l) => JSON.parse(l) as { level: number; file?: string; msg: string }).filter((l) => l.level === 50);
      assert.deepEqual(
        errors.filter((e) => /site profile left out/.test(e.msg)).map((e) => e.file),
        broken,
      );
    } finally {
      await daemon.stop();
    }
    assert.throws(
      () => testConfig(join(root, "var"), { devices: [tcpDevice("b1", 1, 1, "site-battery") as never] }),
      (e: unknown) => isSitegateError(e, "CONFIG_INVALID") && /site-battery/.test(JSON.stringify(e.details)),
      "without the folder the profile is unknown",
    );
  });
});

test("run: a stored device whose site profile broke since is skipped and reported; the daemon starts with the rest", async () => {
  await withTmpDir(async (root) => {
    const dir = join(root, "profiles");
    mkdirSync(dir);
    writeFileSync(join(dir, "good.yaml"), GOOD);
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _enc, cb) {
        lines.push(...String(chunk).split("\n").filter(Boolean));
        cb();
      },
    });
    const logger = () => createLogger({ level: "error", destination: sink, pretty: false, journal: false });
    const config = testConfig(join(root, "var"), { profiles_dir: dir });
    const first = buildDaemon(config, logger());
    await first.start();
    const device = tcpDevice("b1", 1, 1, "site-battery") as never;
    const descriptor = {
      role: "battery",
      device_type: 10,
      capabilities: ["telemetry", "charge", "discharge"],
      profile: "site-battery",
      identity: {},
    };
    first.part<DeviceRegistry>("registry").put(device, descriptor as never, true);
    await first.stop();
    writeFileSync(join(dir, "good.yaml"), `${GOOD}# ${"x".repeat(300 * 1024)}\n`); // now over 256 KiB
    lines.length = 0;
    const second = buildDaemon(config, logger());
    await second.start();
    try {
      const errors = lines.map((l) => JSON.parse(l) as { file?: string; device_id?: string; err?: string; msg: string });
      assert.ok(
        errors.some((e) => /site profile left out/.test(e.msg) && e.file === join(dir, "good.yaml") && /256 KiB/.test(e.err ?? "")),
        lines.join("\n"),
      );
      assert.ok(
        errors.some((e) => e.device_id === "b1" && /cannot poll device/.test(e.msg) && /site-battery/.test(e.err ?? "")),
        lines.join("\n"),
      );
      const b1 = second.devices.get("b1");
      assert.ok(b1 && !b1.power && !b1.switch, "nothing to control: dispatch passes it by");
    } finally {
      await second.stop();
    }
  });
});
