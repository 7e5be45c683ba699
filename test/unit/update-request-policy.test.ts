// Which fleet update requests the daemon records (the `update` command) and root carries out:
// the config's update block. Pure logic: the command runs on a config and a data dir; no
// broker is involved (test/integration/fleet-update.test.ts has the broker round trip).
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { generateKeyPairSync } from "node:crypto";
import { join } from "node:path";
import { parseConfig } from "../../src/load-config.js";
import type { ConfigInput } from "../../src/config/schema.js";
import { runCommand, type CommandAnswer, type CommandDeps } from "../../src/fleet/commands.js";
import { silentLogger } from "../../src/log.js";
import { updateUrlRefusal } from "../../src/update/request.js";
import { testConfigInput } from "../support/config.js";
import { problems as configProblems } from "../support/issues.js";
import { withTmpDir } from "../support/tmp.js";

const PUB = generateKeyPairSync("ed25519").publicKey.export({ type: "spki", format: "pem" }).toString();
const REQ = { url: "https://updates.example/sitegate/0.2.0.bundle", sha256: "a".repeat(64), version: "0.2.0" };

function run(dataDir: string, over: Partial<ConfigInput>, payload: unknown = REQ): CommandAnswer {
  const config = parseConfig({ ...testConfigInput(dataDir), ...over }, dataDir);
  return runCommand("update", payload, { config, log: silentLogger() } as unknown as CommandDeps) as CommandAnswer;
}

const fleet = (signed: boolean) => ({ url: "mqtt://127.0.0.1:1883", username: "site-001", ...(signed ? { command_keys: [PUB] } : {}) });

test("an unsigned update command is refused (403) unless update.allow_unsigned_requests; nothing is written", async () => {
  await withTmpDir(async (dir) => {
    const file = join(dir, "update", "request.json");
    const allowed_urls = ["https://updates.example/sitegate/"];
    let a = run(dir, { fleet: fleet(false), update: { allowed_urls } });
    assert.equal(a.status, 403, JSON.stringify(a.body));
    assert.equal(a.body.error, "forbidden");
    assert.match(String(a.body.message), /unsigned update requests are refused: set fleet\.command_keys/);
    assert.equal(existsSync(file), false);
    a = run(dir, { fleet: fleet(true), update: { allowed_urls } });
    assert.equal(a.status, 202, JSON.stringify(a.body));
    assert.equal(existsSync(file), true);
  });
});

test("an update command's URL must be under update.allowed_urls; none configured takes no updates", async () => {
  await withTmpDir(async (dir) => {
    let a = run(dir, { fleet: fleet(true) });
    assert.equal(a.status, 403);
    assert.match(String(a.body.message), /update\.allowed_urls is empty/);
    a = run(dir, { fleet: fleet(true), update: { allowed_urls: ["https://updates.example/other/"] } });
    assert.equal(a.status, 403);
    assert.deepEqual(
      (a.body.details as Array<{ path: string }>).map((d) => d.path),
      ["url"],
    );
    assert.equal(existsSync(join(dir, "update", "request.json")), false);
  });
});

test("updateUrlRefusal compares origins and normalized paths, not strings", () => {
  const allowed = ["https://updates.example/sitegate/"];
  assert.equal(updateUrlRefusal("https://updates.example/sitegate/a.bundle", allowed), null);
  assert.equal(updateUrlRefusal("https://UPDATES.example:443/sitegate/a.bundle", allowed), null);
  for (const bad of [
    "https://updates.example.evil.example/sitegate/a.bundle",
    "https://updates.example@evil.example/sitegate/a.bundle",
    "https://updates.example:8443/sitegate/a.bundle",
    "https://updates.example/sitegate/../x.bundle",
    "https://updates.example/sitegate/%2e%2e/x.bundle",
    "https://updates.example/sitegate/..%2fx.bundle",
    "https://updates.example/sitegateX/a.bundle",
    "https://user:pw@updates.example/sitegate/a.bundle",
    "http://updates.example/sitegate/a.bundle",
  ])
    assert.notEqual(updateUrlRefusal(bad, allowed), null, bad);
});

test("update.allowed_urls entries: https folders without user, query or fragment", () => {
  const problems = (update: unknown) => configProblems(() => parseConfig({ ...testConfigInput("/tmp/x"), update }, "/"));
  const ok = parseConfig({ ...testConfigInput("/tmp/x"), update: { allowed_urls: ["https://u.example/a/"] } }, "/");
  assert.deepEqual(ok.update, {
    allowed_urls: ["https://u.example/a/"],
    allow_unsigned_requests: false,
    max_bundle_mb: 256,
    download_dir: "/var/lib/sitegate-update",
  });
  for (const [bad, msg] of [
    ["http://u.example/a/", /https/],
    ["https://u.example/a", /must end with "\/"/],
    ["https://x:y@u.example/a/", /user name/],
    ["https://u.example/a/?v=1", /query/],
  ] as const) {
    const p = problems({ allowed_urls: [bad] });
    assert.equal(p[0]?.path, "update.allowed_urls[0]", bad);
    assert.match(p[0].message, msg);
  }
  assert.equal(problems({ allowed_urls: [], surprise: 1 })[0].path, "update.surprise");
});
