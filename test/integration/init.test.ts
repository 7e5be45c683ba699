// `sitegate init` (DESIGN B1) and the example config: a config that check-config passes, 0640,
// hashed secrets printed once, never overwritten; bad flags change nothing.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parse } from "yaml";
import { hashSecret, verifySecret } from "../../src/util/secret-hash.js";
import { testCert } from "../support/tls.js";
import { withTmpDir } from "../support/tmp.js";

const ROOT = resolve(fileURLToPath(import.meta.url), "../../../..");
const CLI = join(ROOT, "dist/src/cli.js");
const sitegate = (args: string[], env: Record<string, string> = {}) =>
  spawnSync(process.execPath, [CLI, ...args], { encoding: "utf8", env: { ...process.env, LOG_LEVEL: "warn", ...env }, input: "" });

test("init --non-interactive writes a config check-config passes: 0640, a certificate, hashed secrets printed once", async () => {
  await withTmpDir(async (dir) => {
    const file = join(dir, "etc", "config.yaml");
    const r = sitegate([
      "init",
      "--config",
      file,
      "--non-interactive",
      "--site-id",
      "bench-7",
      "--organization-id",
      "0b9d8f5e-6a1c-4e2b-9f3d-7c8a1e2f3b4c",
      "--listen",
      "127.0.0.1:9443",
      "--data-dir",
      join(dir, "data"),
      "--execution-url",
      "https://partner.example.com/exec",
      "--data-push-url",
      "https://partner.example.com",
    ]);
    assert.equal(r.status, 0, r.stderr);
    const apiKey = /^api_key: (\S+)$/m.exec(r.stdout)?.[1];
    const password = /^password: (\S+)$/m.exec(r.stdout)?.[1];
    assert.ok(apiKey && apiKey.length >= 24 && password && password.length >= 16, r.stdout);
    assert.equal(statSync(file).mode & 0o777, 0o640);
    assert.equal(statSync(join(dir, "etc", "tls", "key.pem")).mode & 0o777, 0o640);
    const text = readFileSync(file, "utf8");
    assert.ok(!text.includes(apiKey) && !text.includes(password), "no clear secret in the file");
    const cfg = parse(text) as {
      site_id: string;
      organization_id: string;
      data_dir: string;
      http: { listen: string };
      auth: { users: { password_hash: string }[]; api_keys: { key_hash: string }[] };
    };
    assert.equal(cfg.site_id, "bench-7");
    assert.equal(cfg.organization_id, "0b9d8f5e-6a1c-4e2b-9f3d-7c8a1e2f3b4c");
    assert.equal(cfg.http.listen, "127.0.0.1:9443");
    assert.equal(cfg.data_dir, join(dir, "data"));
    assert.ok(verifySecret(password, cfg.auth.users[0].password_hash), "the password's hash");
    assert.ok(verifySecret(apiKey, cfg.auth.api_keys[0].key_hash), "the API key's hash");
    const check = sitegate(["check-config", "--config", file]);
    assert.equal(check.status, 0, check.stderr);
    // SITEGATE_CONFIG stands in for the default /etc/sitegate/config.yaml
    assert.equal(sitegate(["check-config"], { SITEGATE_CONFIG: file }).status, 0);

    const again = sitegate(["init", "--config", file, "--non-interactive"]);
    assert.equal(again.status, 2);
    assert.match(again.stderr, /refused: .*config\.yaml exists/);
    assert.equal(readFileSync(file, "utf8"), text, "not overwritten");
  });
});

test("init leaves what it cannot know as placeholders; check-config names each loudly and still exits 0", async () => {
  await withTmpDir(async (dir) => {
    const file = join(dir, "config.yaml");
    const r = sitegate(["init", "--config", file, "--non-interactive", "--data-dir", join(dir, "data")]);
    assert.equal(r.status, 0, r.stderr);
    const text = readFileSync(file, "utf8");
    const cfg = parse(text) as { organization_id: string; partner: { execution_url: string; data_push_url: string } };
    assert.equal(cfg.organization_id, "00000000-0000-0000-0000-000000000000", "the nil UUID, not a random one that looks real");
    assert.deepEqual(cfg.partner, { execution_url: "https://partner.invalid/exec", data_push_url: "https://partner.invalid" });
    // the file says what is left to set, and so does init
    assert.match(text, /^# Still to set for the site .*\n#   unfinished config: organization_id: /m);
    for (const key of ["organization_id", "auth.ip_allowlist", "partner.execution_url", "partner.data_push_url"]) {
      assert.match(text, new RegExp(`^#   unfinished config: ${key.replace(".", "\\.")}: `, "m"), key);
      assert.match(r.stderr, new RegExp(`^WARNING: unfinished config: ${key.replace(".", "\\.")}: `, "m"), key);
    }

    const check = sitegate(["check-config", "--config", file]);
    assert.equal(check.status, 0, "warnings, not errors: the unit's ExecStartPre runs check-config");
    assert.match(check.stdout, /^config ok: /);
    const warnings = check.stderr.split("\n").filter((l) => l.startsWith("WARNING: unfinished config: "));
    assert.deepEqual(
      warnings.map((l) => l.split(": ")[2]),
      ["organization_id", "auth.ip_allowlist", "partner.execution_url", "partner.data_push_url"],
      check.stderr,
    );
    assert.match(check.stderr, /organization_id: 00000000-0000-0000-0000-000000000000 is the placeholder sitegate init writes/);
    assert.match(
      check.stderr,
      /auth\.ip_allowlist: 127\.0\.0\.1\/32, ::1\/128 admits loopback only, while the API listens on 0\.0\.0\.0:8443/,
    );
    assert.match(check.stderr, /partner\.execution_url: https:\/\/partner\.invalid\/exec is a placeholder/);
    assert.match(check.stderr, /the config is unfinished \(4 above\): the gateway runs, and \/healthz says degraded/);
  });
});

test("init given the partner's values writes a finished config: check-config warns about nothing", async () => {
  await withTmpDir(async (dir) => {
    const file = join(dir, "config.yaml");
    const given = ["--organization-id", "0b9d8f5e-6a1c-4e2b-9f3d-7c8a1e2f3b4c", "--listen", "127.0.0.1:9443"];
    const urls = ["--execution-url", "https://api.partner-energy.eu/exec", "--data-push-url", "https://api.partner-energy.eu"];
    const r = sitegate(["init", "--config", file, "--non-interactive", "--data-dir", join(dir, "data"), ...given, ...urls]);
    assert.equal(r.status, 0, r.stderr);
    assert.doesNotMatch(readFileSync(file, "utf8") + r.stderr, /unfinished|Still to set/);
    const check = sitegate(["check-config", "--config", file]);
    assert.equal(check.status, 0, check.stderr);
    assert.doesNotMatch(check.stderr, /WARNING|unfinished/);
  });
});

test("init refuses bad flags and a missing terminal before writing anything", async () => {
  await withTmpDir(async (dir) => {
    const file = join(dir, "etc", "config.yaml");
    const bad = sitegate(["init", "--config", file, "--non-interactive", "--organization-id", "not-a-uuid"]);
    assert.equal(bad.status, 2);
    assert.match(bad.stderr, /organization_id: expected a UUID, found "not-a-uuid"/);
    const listen = sitegate(["init", "--config", file, "--non-interactive", "--listen", "nowhere"]);
    assert.equal(listen.status, 2);
    assert.match(listen.stderr, /http\.listen/);
    const noTty = sitegate(["init", "--config", file]);
    assert.equal(noTty.status, 2);
    assert.match(noTty.stderr, /no terminal to ask on: pass --non-interactive/);
    const half = sitegate(["init", "--config", file, "--non-interactive", "--cert", join(dir, "c.pem")]);
    assert.equal(half.status, 2);
    assert.match(half.stderr, /--cert and --key go together/);
    assert.ok(!existsSync(join(dir, "etc")), `nothing written: ${existsSync(join(dir, "etc")) ? readdirSync(join(dir, "etc")) : ""}`);
  });
});

test("init with --cert/--key uses that certificate and makes none", async () => {
  await withTmpDir(async (dir) => {
    const file = join(dir, "config.yaml");
    const c = testCert();
    const r = sitegate([
      "init",
      "--config",
      file,
      "--non-interactive",
      "--cert",
      c.certFile,
      "--key",
      c.keyFile,
      "--data-dir",
      join(dir, "data"),
    ]);
    assert.equal(r.status, 0, r.stderr);
    const cfg = parse(readFileSync(file, "utf8")) as { http: { tls: { cert: string; key: string } } };
    assert.deepEqual(cfg.http.tls, { cert: c.certFile, key: c.keyFile });
    assert.ok(!existsSync(join(dir, "tls")));
  });
});

/** The hashes config.example.yaml carried of change-me-password and change-me-api-key. */
const OLD_EXAMPLE_PASSWORD_HASH = "scrypt$16384$8$1$Ar2eE07/sPGpi0XLk7YWoQ==$3nJvddHpt4/XFZnu4/NVZ06Yar7M3Id6+H5wArTck+U=";
const OLD_EXAMPLE_KEY_HASH = "scrypt$16384$8$1$vUflMxaahVkNfXWo4Z2WHg==$ZNW2fqyk5yt3bN1d5RV/Q0fbLZxTUmy0uESHZCCFNes=";

/** config.example.yaml's text, and where to write it in `dir` beside the TLS files it names (tls/). */
function exampleIn(dir: string): { example: string; file: string } {
  mkdirSync(join(dir, "tls"));
  copyFileSync(testCert().certFile, join(dir, "tls", "cert.pem"));
  copyFileSync(testCert().keyFile, join(dir, "tls", "key.pem"));
  return { example: readFileSync(join(ROOT, "config.example.yaml"), "utf8"), file: join(dir, "config.yaml") };
}

test("config.example.yaml: check-config refuses only its two secret placeholders, with the hint; with hashes of real secrets it passes", async () => {
  await withTmpDir(async (dir) => {
    const { example, file } = exampleIn(dir);
    writeFileSync(file, example);
    let r = sitegate(["check-config", "--config", file]);
    assert.equal(r.status, 2, r.stdout);
    const problems = r.stderr.split("\n").filter((l) => /^\S+:\d+:\d+: /.test(l));
    assert.equal(problems.length, 2, r.stderr);
    assert.match(r.stderr, /auth\.users\[0\]\.password_hash: must be an scrypt hash: the last line `sitegate hash-secret` prints/);
    assert.match(r.stderr, /auth\.api_keys\[0\]\.key_hash: must be an scrypt hash/);
    const [pw, key] = example.match(/"REPLACE with the output of: sitegate hash-secret"/g)!;
    assert.ok(pw && key);
    writeFileSync(
      file,
      example
        .replace("REPLACE with the output of: sitegate hash-secret", hashSecret("a-secret-of-my-own"))
        .replace("REPLACE with the output of: sitegate hash-secret", hashSecret("a-key-of-my-own")),
    );
    r = sitegate(["check-config", "--config", file]);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /devices: +2/);
  });
});

test("check-config and run refuse a hash of an example secret, by path, whatever its salt", async () => {
  await withTmpDir(async (dir) => {
    const { example, file } = exampleIn(dir);
    writeFileSync(
      file,
      example
        .replace("REPLACE with the output of: sitegate hash-secret", OLD_EXAMPLE_PASSWORD_HASH)
        .replace("REPLACE with the output of: sitegate hash-secret", hashSecret("change-me-password")),
    );
    for (const cmd of ["check-config", "run"]) {
      const r = sitegate([cmd, "--config", file]);
      assert.equal(r.status, 2, `${cmd}: ${r.stdout}${r.stderr}`);
      assert.match(
        r.stderr,
        /auth\.users\[0\]\.password_hash: is the hash of "change-me-password", an example secret everyone can read; make a secret of your own and its hash with `sitegate hash-secret`/,
      );
      assert.match(r.stderr, /auth\.api_keys\[0\]\.key_hash: is the hash of "change-me-password"/);
    }
    writeFileSync(
      file,
      example
        .replace("REPLACE with the output of: sitegate hash-secret", hashSecret("mine"))
        .replace("REPLACE with the output of: sitegate hash-secret", OLD_EXAMPLE_KEY_HASH),
    );
    const r = sitegate(["check-config", "--config", file]);
    assert.equal(r.status, 2);
    assert.match(r.stderr, /auth\.api_keys\[0\]\.key_hash: is the hash of "change-me-api-key"/);
    assert.doesNotMatch(r.stderr, /password_hash/);
  });
});

test("--version prints the version, the Node.js version and ABI, and the architecture", () => {
  const r = sitegate(["--version"]);
  assert.equal(r.status, 0);
  const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string };
  assert.equal(
    r.stdout.trim(),
    `sitegate ${pkg.version} node ${process.versions.node} (abi ${process.versions.modules}) linux-${process.arch}`,
  );
});
