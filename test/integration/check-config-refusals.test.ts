// check-config refuses everything run would refuse, because both validate through the
// same parseConfig: a listen port outside 1-65535, a time zone the daemon cannot run in,
// a URL scheme a part cannot use, a file run cannot read or use (a directory, not PEM, a
// key of another certificate). Each case: check-config exits 2 naming the path, and run
// refuses the same file before it starts anything. On the journal, the refusal is logged
// at priority err ("<3>" on each line, as ExecStartPre's output).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { closeSync, fstatSync, mkdirSync, openSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { testConfigInput } from "../support/config.js";
import { untrustedCert } from "../support/tls.js";
import { withTmpDir } from "../support/tmp.js";
import { CLI, sitegate, writeConfig } from "../support/cli.js";

type Input = Record<string, any>;

interface Case {
  name: string;
  /** The config path the refusal names. */
  path: string;
  edit(cfg: Input, dir: string): void;
}

const CASES: Case[] = [
  { name: "an API port above 65535", path: "http.listen", edit: (c) => (c.http.listen = "127.0.0.1:99999") },
  { name: "a status page port above 65535", path: "ui.listen", edit: (c) => (c.ui = { enabled: true, listen: "0.0.0.0:70000" }) },
  {
    name: "a maintenance time zone that does not exist",
    path: "maintenance.timezone",
    edit: (c) => (c.maintenance = { at: "03:30", timezone: "Mars/Olympus_Mons" }),
  },
  {
    name: "a schedule time zone that does not exist",
    path: "schedules[0].timezone",
    edit: (c) =>
      (c.schedules = [
        {
          name: "night",
          cron: "0 1 * * *",
          timezone: "Europe/Atlantis",
          duration_s: 600,
          event_type: "charge",
          event_quantity: 1,
          event_unit: "kW",
        },
      ]),
  },
  { name: "a Zigbee bridge over websockets", path: "zigbee.url", edit: (c) => (c.zigbee = { url: "ws://127.0.0.1:1883", devices: [] }) },
  {
    name: "a plain mqtt:// fleet broker on the network",
    path: "fleet.url",
    edit: (c) => (c.fleet = { url: "mqtt://broker.example:1883", username: "site-001", password: "x" }),
  },
  {
    name: "a TLS certificate that is a directory",
    path: "http.tls.cert",
    edit: (c, dir) => {
      mkdirSync(join(dir, "cert.pem"));
      c.http.tls.cert = join(dir, "cert.pem");
    },
  },
  {
    name: "a TLS key that is not PEM",
    path: "http.tls.cert",
    edit: (c, dir) => {
      writeFileSync(join(dir, "key.pem"), "not a key\n");
      c.http.tls.key = join(dir, "key.pem");
    },
  },
  {
    name: "a TLS key of another certificate",
    path: "http.tls.cert",
    edit: (c, dir) => (c.http.tls.key = untrustedCert(dir).keyFile),
  },
  {
    name: "a partner CA file that holds no certificate",
    path: "partner.ca_file",
    edit: (c, dir) => {
      writeFileSync(join(dir, "ca.pem"), "hello\n");
      c.partner.ca_file = join(dir, "ca.pem");
    },
  },
  {
    name: "a secret file that is missing",
    path: "partner.headers[0].value_file",
    edit: (c, dir) => (c.partner.headers = [{ name: "X-Partner-Key", value_file: join(dir, "absent") }]),
  },
];

for (const k of CASES) {
  test(`check-config and run both refuse ${k.name}`, async () => {
    await withTmpDir((dir) => {
      const cfg = testConfigInput(join(dir, "data")) as Input;
      k.edit(cfg, dir);
      const file = writeConfig(dir, cfg);
      const check = sitegate(["check-config", "--config", file]);
      assert.equal(check.code, 2, `check-config accepted it: ${check.stdout}`);
      // FILE:LINE:COLUMN: path: ... (the file as given, the place of the key's value)
      const line = check.stderr.split("\n").find((l) => l.startsWith(`${file}:`) && l.includes(`: ${k.path}: `));
      assert.match(line ?? "", /^[^:]+:\d+:\d+: /, `names ${k.path} at FILE:LINE:COLUMN: ${check.stderr}`);
      const run = spawnSync(process.execPath, [CLI, "run", "--config", file], { encoding: "utf8", timeout: 30_000 });
      assert.equal(run.status, 2, `run refuses it before starting: ${run.stderr}`);
      assert.equal(run.stderr, check.stderr.replace("sitegate check-config:", "sitegate run:"), "the same problems");
    });
  });
}

test("a refused config is logged at priority err when stderr is the journal", async () => {
  await withTmpDir((dir) => {
    const cfg = testConfigInput(join(dir, "data")) as Input;
    cfg.http.listen = "127.0.0.1:99999";
    const file = writeConfig(dir, cfg);
    // The journal's stream stands in as a file: JOURNAL_STREAM names its device and inode.
    const out = join(dir, "stderr");
    const fd = openSync(out, "w");
    const st = fstatSync(fd);
    try {
      const r = spawnSync(process.execPath, [CLI, "check-config", "--config", file], {
        stdio: ["ignore", "ignore", fd],
        env: { ...process.env, JOURNAL_STREAM: `${st.dev}:${st.ino}` },
      });
      assert.equal(r.status, 2);
    } finally {
      closeSync(fd);
    }
    const lines = readFileSync(out, "utf8").split("\n").filter(Boolean);
    assert.ok(lines.length >= 2, lines.join("\n"));
    for (const l of lines) assert.match(l, /^<3>/, `every line at priority err: ${l}`);
    assert.ok(lines.some((l) => l.includes("http.listen: the port must be 1-65535")));
  });
});
