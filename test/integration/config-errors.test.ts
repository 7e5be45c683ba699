// Config errors a person can act on, as `sitegate check-config` prints them for real YAML
// files: each problem once, at FILE:LINE:COLUMN with its config path, what was expected and
// what was found, the line under it with a caret (secret values masked); a missing key is
// "required", an unknown key gets the nearest known one, a YAML syntax error is reported at
// the line to fix, and one run lists every problem, the unknown profile names too.
import { test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { testConfigInput, TEST_ORG } from "../support/config.js";
import { withTmpDir } from "../support/tmp.js";
import { sitegate } from "../support/cli.js";

/** A valid config file, one line per entry: tests change lines by number (1-based, as the errors count). */
function baseLines(dir: string): string[] {
  const c = testConfigInput(join(dir, "data"));
  return [
    /*  1 */ "site_id: site-001",
    /*  2 */ `organization_id: ${TEST_ORG}`,
    /*  3 */ `data_dir: ${join(dir, "data")}`,
    /*  4 */ "http:",
    /*  5 */ '  listen: "127.0.0.1:0"',
    /*  6 */ `  tls: { cert: ${c.http.tls.cert}, key: ${c.http.tls.key} }`,
    /*  7 */ "auth:",
    /*  8 */ "  client_id: partner-portal",
    /*  9 */ "  users:",
    /* 10 */ "    - username: partner",
    /* 11 */ `      password_hash: "${c.auth.users![0]!.password_hash}"`,
    /* 12 */ "  api_keys:",
    /* 13 */ `    - { name: partner, key_hash: "${c.auth.api_keys![0]!.key_hash}" }`,
    /* 14 */ "partner:",
    /* 15 */ "  execution_url: https://127.0.0.1:9/exec",
    /* 16 */ "  data_push_url: https://127.0.0.1:9",
    /* 17 */ "telemetry:",
    /* 18 */ "  poll_interval_ms: 1000",
    /* 19 */ "devices: []",
  ];
}

interface Checked {
  file: string;
  code: number | null;
  stderr: string;
  /** The problem lines (FILE:LINE:COLUMN: ...), in order. */
  problems: string[];
}

/** check-config on the base file with `edit` applied to its lines. */
async function check(edit: (lines: string[], dir: string) => void): Promise<Checked> {
  let out: Checked | undefined;
  await withTmpDir((dir) => {
    const lines = baseLines(dir);
    edit(lines, dir);
    const file = join(dir, "config.yaml");
    writeFileSync(file, lines.join("\n") + "\n");
    const r = sitegate(["check-config", "--config", file]);
    const problems = r.stderr.split("\n").filter((l) => l.startsWith(`${file}:`));
    out = { file, code: r.code, stderr: r.stderr, problems };
  });
  return out!;
}

const line = (n: number, lines: string[], text: string) => (lines[n - 1] = text);

test("the base file passes, so each case below fails for its own edit only", async () => {
  const r = await check(() => {});
  assert.equal(r.code, 0, r.stderr);
});

test("a schema error says FILE:LINE:COLUMN, the path, what was expected and what was found, with the line and a caret", async () => {
  const r = await check((l) => line(18, l, "  poll_interval_ms: 50"));
  assert.equal(r.code, 2);
  assert.deepEqual(r.problems, [`${r.file}:18:21: telemetry.poll_interval_ms: expected a number >= 100, found 50`]);
  assert.ok(r.stderr.includes(`    18 |   poll_interval_ms: 50\n       |                     ^\n`), r.stderr);
});

test("a missing key is required, at the block that lacks it (not a complaint about its format)", async () => {
  const r = await check((l) => l.splice(14, 1));
  assert.deepEqual(r.problems, [`${r.file}:14:1: partner.execution_url: required`]);
  assert.doesNotMatch(r.stderr, /must be a URL/);
});

test("an unknown key suggests the nearest known one, at the key", async () => {
  const r = await check((l) => line(18, l, "  poll_interval: 500"));
  assert.deepEqual(r.problems, [`${r.file}:18:3: telemetry.poll_interval: unknown key; did you mean "poll_interval_ms"?`]);
  const far = await check((l) => line(18, l, "  colour: blue"));
  assert.deepEqual(
    far.problems,
    [`${far.file}:18:3: telemetry.colour: unknown key (expected one of poll_interval_ms, retention_max_mb, commit_interval_s)`],
    "nothing near: the keys the block takes",
  );
});

test("an over-indented line is reported once, at its own line, with the line above for context", async () => {
  const r = await check((l) => line(16, l, "     data_push_url: https://127.0.0.1:9"));
  assert.equal(r.code, 2);
  assert.equal(r.problems.length, 1, r.stderr);
  assert.match(r.problems[0]!, new RegExp(`^${r.file}:16:6: this line is indented deeper than the keys beside it`));
  assert.ok(r.stderr.includes("    15 |   execution_url: https://127.0.0.1:9/exec\n    16 |      data_push_url:"), r.stderr);
});

test("every problem in one run, each once, in the file's order: the unknown profile names too", async () => {
  const devices = [
    `  - { device_id: m1, device_type: modbus, device_integration: ${TEST_ORG}/sdm631, mb_type: 2, mb_device_type: 99, mb_ip: 127.0.0.1, mb_port: 502 }`,
    `  - { device_id: m2, device_type: modbus, device_integration: ${TEST_ORG}/warp-drive, mb_type: 2, mb_device_type: 98, mb_ip: 127.0.0.1, mb_port: 502 }`,
  ];
  const r = await check((l) => {
    line(1, l, "site_id: 42");
    line(18, l, "  poll_interval: 500");
    line(19, l, ["devices:", ...devices].join("\n"));
  });
  const col = (text: string, what: string) => text.indexOf(what) + 1;
  const known = (p: string | undefined) => p?.split("(known: ")[1];
  assert.deepEqual(r.problems, [
    `${r.file}:1:10: site_id: expected a string, found 42`,
    `${r.file}:18:3: telemetry.poll_interval: unknown key; did you mean "poll_interval_ms"?`,
    `${r.file}:20:${col(devices[0]!, TEST_ORG)}: devices[0].device_integration: unknown integration "sdm631"; did you mean "sdm630"? (known: ${known(r.problems[2])}`,
    `${r.file}:21:${col(devices[1]!, TEST_ORG)}: devices[1].device_integration: unknown integration "warp-drive" (known: ${known(r.problems[3])}`,
    `${r.file}:21:${col(devices[1]!, "98")}: devices[1].mb_device_type: expected one of 1, 2, 3, 99, found 98`,
  ]);
  assert.match(known(r.problems[2]) ?? "", /\bsdm630\b.*\bsunspec\b/);
  const said = r.stderr.split("\n").filter((x) => /^\S+:\d+:\d+: /.test(x));
  assert.equal(new Set(said).size, said.length, "each problem once");
  // a long line is shown around its column, the caret under the value found
  const out = r.stderr.split("\n");
  const at = out.indexOf(said[4]!);
  assert.ok(out[at + 1]!.length <= 90 && out[at + 1]!.startsWith("    21 | ..."), out[at + 1]);
  assert.equal(out[at + 2]!.indexOf("^"), out[at + 1]!.indexOf("mb_device_type: 98") + "mb_device_type: ".length);
});

test("a YAML syntax error points at the line to fix, with a snippet whose secret values are masked", async () => {
  const hash = baseLines("/x")[10]!.split('"')[1]!;
  // an unclosed quote: the error is where the string opens, not at the end of the file
  const r = await check((l) => line(11, l, `      password_hash: "${hash}`));
  assert.equal(r.code, 2);
  assert.deepEqual(r.problems, [`${r.file}:11:22: a quoted value is not closed: the closing quote is missing`]);
  assert.ok(r.stderr.includes("    11 |       password_hash: ***\n"), r.stderr);
  assert.ok(!r.stderr.includes(hash.slice(20)), "the hash is not shown");
  // a tab as indentation, on a line with a flow mapping holding a secret
  const tab = await check((l) => line(13, l, `\t- { name: partner, key_hash: "${hash}" }`));
  assert.equal(tab.problems.length, 1, tab.stderr);
  assert.match(tab.problems[0]!, new RegExp(`^${tab.file}:13:1: `));
  assert.ok(tab.stderr.includes("key_hash: *** }"), tab.stderr);
  assert.ok(!tab.stderr.includes(hash.slice(20)), "the hash is not shown");
});

test("a value found under a secret key is described, never shown", async () => {
  const r = await check((l) => line(11, l, "      password_hash: hunter2-hunter2"));
  assert.deepEqual(r.problems, [
    `${r.file}:11:22: auth.users[0].password_hash: must be an scrypt hash: the last line \`sitegate hash-secret\` prints (or let \`sitegate init\` write the config), found a value of 15 characters (not shown)`,
  ]);
  assert.ok(!r.stderr.includes("hunter2"), r.stderr);
});
