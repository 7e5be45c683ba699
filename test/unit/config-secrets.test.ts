// Secrets from files (partner.headers[].value_file, fleet.password_file), the start-up
// check for secret files other users can read, and auth.admin_allowlist's default.
import { test } from "node:test";
import assert from "node:assert/strict";
import { chmodSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseConfig } from "../../src/load-config.js";
import { readableByOthers, secretFiles } from "../../src/config/secret-files.js";
import { testConfigInput } from "../support/config.js";
import { withTmpDir } from "../support/tmp.js";
import { problems } from "../support/issues.js";

const fleet = { url: "mqtt://127.0.0.1:1883", username: "site-001" };

test("partner header and fleet password values come from files, relative to the config, without the trailing newline", async () => {
  await withTmpDir((dir) => {
    writeFileSync(join(dir, "partner-key"), "s3cret-header\n", { mode: 0o600 });
    writeFileSync(join(dir, "mqtt-pass"), "mqtt-s3cret", { mode: 0o600 });
    const input = testConfigInput(dir);
    input.partner.headers = [
      { name: "X-Partner-Key", value_file: "partner-key" },
      { name: "X-Plain", value: "plain" },
    ];
    input.fleet = { ...fleet, password_file: join(dir, "mqtt-pass") };
    const cfg = parseConfig(input, dir);
    assert.deepEqual(
      cfg.partner.headers.map((h) => [h.name, h.value]),
      [
        ["X-Partner-Key", "s3cret-header"],
        ["X-Plain", "plain"],
      ],
    );
    assert.equal(cfg.partner.headers[0].value_file, join(dir, "partner-key"));
    assert.equal(cfg.fleet?.password, "mqtt-s3cret");
  });
});

test("exactly one of a secret and its _file twin; an unreadable file is a config error by path", async () => {
  await withTmpDir((dir) => {
    writeFileSync(join(dir, "k"), "v");
    const both = testConfigInput(dir);
    both.partner.headers = [{ name: "X-A", value: "v", value_file: "k" }, { name: "X-B" }];
    both.fleet = { ...fleet, password: "p", password_file: "k" };
    const list = problems(() => parseConfig(both, dir));
    for (const path of ["partner.headers[0].value", "partner.headers[1].value", "fleet.password_file"])
      assert.ok(
        list.some((d) => d.path === path),
        `${path} in ${JSON.stringify(list)}`,
      );
    const missing = testConfigInput(dir);
    missing.partner.headers = [{ name: "X-A", value_file: "no-such-file" }];
    missing.fleet = { ...fleet, password_file: "no-such-pass" };
    const m = problems(() => parseConfig(missing, dir));
    assert.ok(
      m.some((d) => d.path === "partner.headers[0].value_file" && /cannot read .*no-such-file.*ENOENT/.test(d.message)),
      JSON.stringify(m),
    );
    assert.ok(
      m.some((d) => d.path === "fleet.password_file" && /no-such-pass/.test(d.message)),
      JSON.stringify(m),
    );
  });
});

test("the config file and secret files others can read are reported; 0640 and 0600 are not", async () => {
  await withTmpDir((dir) => {
    const cfgFile = join(dir, "config.yaml");
    writeFileSync(cfgFile, "{}");
    writeFileSync(join(dir, "k"), "v");
    const input = testConfigInput(dir);
    input.partner.headers = [{ name: "X-A", value_file: "k" }];
    const cfg = parseConfig(input, dir);
    chmodSync(cfgFile, 0o644);
    chmodSync(join(dir, "k"), 0o600);
    assert.deepEqual(
      readableByOthers(secretFiles(cfgFile, cfg))
        .map((w) => [w.file, w.mode])
        .filter(([f]) => f.startsWith(dir)),
      [[cfgFile, "0644"]],
    );
    chmodSync(cfgFile, 0o640);
    chmodSync(join(dir, "k"), 0o604);
    assert.deepEqual(
      readableByOthers(secretFiles(cfgFile, cfg))
        .map((w) => w.file)
        .filter((f) => f.startsWith(dir)),
      [join(dir, "k")],
    );
  });
});

test("auth.admin_allowlist defaults to ip_allowlist, and may be set apart", () => {
  const input = testConfigInput("/tmp/x");
  input.auth.ip_allowlist = ["192.0.2.0/24"];
  assert.deepEqual(parseConfig(input, "/").auth.admin_allowlist, ["192.0.2.0/24"]);
  input.auth.admin_allowlist = ["10.0.0.0/8"];
  const cfg = parseConfig(input, "/");
  assert.deepEqual([cfg.auth.ip_allowlist, cfg.auth.admin_allowlist], [["192.0.2.0/24"], ["10.0.0.0/8"]]);
  input.auth.admin_allowlist = ["nope"];
  assert.ok(problems(() => parseConfig(input, "/")).some((d) => d.path.startsWith("auth.admin_allowlist")));
});
