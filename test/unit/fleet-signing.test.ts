// Signed fleet commands, the pure part: what the signature covers, the age window, the
// envelope's format; the config's command_keys; and the nonce table on a real SQLite file
// (replays refused, expired nonces pruned, the table bounded).
import { test } from "node:test";
import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { join } from "node:path";
import { CommandVerifier, FUTURE_SKEW_MS, SIGNATURE_PROPS, signCommand } from "../../src/fleet/signing.js";
import { FLEET_MIGRATIONS } from "../../src/fleet/migrations.js";
import { MAX_NONCES, NonceStore } from "../../src/fleet/nonces.js";
import { StoragePart } from "../../src/storage/part.js";
import { parseConfig } from "../../src/load-config.js";
import { isSitegateError, type SitegateError } from "../../src/errors.js";
import { silentLogger } from "../../src/log.js";
import { testConfigInput } from "../support/config.js";
import { withTmpDir } from "../support/tmp.js";

const pair = () => {
  const k = generateKeyPairSync("ed25519");
  return {
    pub: k.publicKey.export({ type: "spki", format: "pem" }) as string,
    priv: k.privateKey.export({ type: "pkcs8", format: "pem" }) as string,
  };
};
const A = pair();
const B = pair();
const NOW = Date.parse("2025-06-01T12:00:00.000Z");
const body = Buffer.from('{"devices":[]}');
const at = (ms: number) => new Date(ms).toISOString();

test("a signature covers site, command, payload, issue time and nonce; any other key or any changed field fails", () => {
  const v = new CommandVerifier([B.pub, A.pub], 300);
  const props = signCommand(A.priv, { site: "site-001", name: "configure", body, issuedAt: at(NOW), nonce: "n".repeat(22) });
  const good = v.check("site-001", "configure", body, props, NOW);
  assert.deepEqual(good, { ok: true, nonce: "n".repeat(22), expiresAt: NOW + 300_000 });

  const fails = (site: string, name: string, b: Buffer, p: Record<string, string>) => {
    const r = v.check(site, name, b, p, NOW);
    assert.equal(r.ok, false);
    return (r as { message: string }).message;
  };
  assert.match(fails("site-002", "configure", body, props), /does not verify/);
  assert.match(fails("site-001", "dr", body, props), /does not verify/);
  assert.match(fails("site-001", "configure", Buffer.from('{"devices":[1]}'), props), /does not verify/);
  assert.match(fails("site-001", "configure", body, { ...props, [SIGNATURE_PROPS.issuedAt]: at(NOW + 1) }), /does not verify/);
  assert.match(fails("site-001", "configure", body, { ...props, [SIGNATURE_PROPS.nonce]: "m".repeat(22) }), /does not verify/);
  const byOther = signCommand(pair().priv, { site: "site-001", name: "configure", body, issuedAt: at(NOW) });
  assert.match(fails("site-001", "configure", body, byOther), /does not verify/);
  // A key that is not listed verifies nothing, even with a good signature of its own.
  assert.equal(new CommandVerifier([B.pub], 300).check("site-001", "configure", body, props, NOW).ok, false);
});

test("age: up to command_max_age_s old and a minute ahead are accepted; older or further ahead refused", () => {
  const v = new CommandVerifier([A.pub], 300);
  const signedAt = (ms: number) => signCommand(A.priv, { site: "s", name: "ping", body: Buffer.alloc(0), issuedAt: at(ms) });
  assert.equal(v.check("s", "ping", Buffer.alloc(0), signedAt(NOW - 300_000), NOW).ok, true);
  const stale = v.check("s", "ping", Buffer.alloc(0), signedAt(NOW - 300_001), NOW);
  assert.equal(stale.ok, false);
  assert.match((stale as { message: string }).message, /older than fleet.command_max_age_s \(300 s\)/);
  assert.equal(v.check("s", "ping", Buffer.alloc(0), signedAt(NOW + FUTURE_SKEW_MS), NOW).ok, true);
  const ahead = v.check("s", "ping", Buffer.alloc(0), signedAt(NOW + FUTURE_SKEW_MS + 1), NOW);
  assert.match((ahead as { message: string }).message, /ahead of the gateway's clock/);
});

test("the envelope: missing, malformed or repeated properties get a message naming the property", () => {
  const v = new CommandVerifier([A.pub], 300);
  const props = signCommand(A.priv, { site: "s", name: "ping", body: Buffer.alloc(0), issuedAt: at(NOW) });
  const msg = (p: Record<string, string | string[]> | undefined) => {
    const r = v.check("s", "ping", Buffer.alloc(0), p, NOW);
    assert.equal(r.ok, false);
    return (r as { message: string }).message;
  };
  assert.match(msg(undefined), /unsigned command refused/);
  assert.match(msg({ other: "x" }), /unsigned command refused/);
  assert.match(msg({ ...props, [SIGNATURE_PROPS.issuedAt]: "2025-06-01 12:00:00" }), /sg-issued-at must be/);
  assert.match(msg({ ...props, [SIGNATURE_PROPS.issuedAt]: [at(NOW), at(NOW)] }), /sg-issued-at must be/);
  assert.match(msg({ ...props, [SIGNATURE_PROPS.nonce]: "short" }), /sg-nonce must be/);
  assert.match(msg({ ...props, [SIGNATURE_PROPS.signature]: "AAAA" }), /sg-signature must be/);
  const { [SIGNATURE_PROPS.signature]: _, ...unsignedButDated } = props;
  assert.match(msg(unsignedButDated), /sg-signature must be/);
  // base64url is accepted as well as base64.
  const url = { ...props, [SIGNATURE_PROPS.signature]: Buffer.from(props[SIGNATURE_PROPS.signature], "base64").toString("base64url") };
  assert.equal(v.check("s", "ping", Buffer.alloc(0), url, NOW).ok, true);
});

test("config: command_keys must be ed25519 public keys in PEM; command_max_age_s defaults to 300", () => {
  const fleet = { url: "mqtt://127.0.0.1:1883", username: "u", password: "p" };
  const ok = parseConfig({ ...testConfigInput("/tmp/x"), fleet: { ...fleet, command_keys: [A.pub] } }, "/");
  assert.deepEqual(ok.fleet?.command_keys, [A.pub]);
  assert.equal(ok.fleet?.command_max_age_s, 300);
  assert.equal(parseConfig({ ...testConfigInput("/tmp/x"), fleet }, "/").fleet?.command_keys, undefined);
  const problems = (extra: object) => {
    try {
      parseConfig({ ...testConfigInput("/tmp/x"), fleet: { ...fleet, ...extra } }, "/");
    } catch (e) {
      assert.ok(isSitegateError(e, "CONFIG_INVALID"));
      return (e as SitegateError).details;
    }
    assert.fail("accepted");
  };
  const rsa = generateKeyPairSync("rsa", { modulusLength: 1024 }).publicKey.export({ type: "spki", format: "pem" }) as string;
  assert.deepEqual(problems({ command_keys: [rsa] })[0], {
    path: "fleet.command_keys[0]",
    message: `must be an ed25519 public key in PEM (-----BEGIN PUBLIC KEY-----), found a value of ${rsa.length} characters (not shown)`,
  });
  assert.equal(problems({ command_keys: [A.priv] })[0].path, "fleet.command_keys[0]", "a private key is not accepted");
  assert.equal(problems({ command_keys: ["not a key"] })[0].path, "fleet.command_keys[0]");
  assert.match(problems({ command_keys: [] })[0].message, /at least one key/);
  assert.equal(problems({ command_keys: [A.pub], command_max_age_s: 0 })[0].path, "fleet.command_max_age_s");
});

test("nonces: a second claim is a replay, also after reopening the database; expired ones are pruned; the table is bounded", async () => {
  await withTmpDir(async (dir) => {
    const open = () => {
      const storage = new StoragePart(join(dir, "d"), [FLEET_MIGRATIONS], silentLogger());
      storage.start();
      return { storage, queue: new NonceStore(storage) };
    };
    let { storage, queue } = open();
    assert.equal(queue.claimNonce("a".repeat(22), NOW + 300_000, NOW), "ok");
    assert.equal(queue.claimNonce("a".repeat(22), NOW + 300_000, NOW + 1000), "replayed");
    storage.stop();
    ({ storage, queue } = open());
    assert.equal(queue.claimNonce("a".repeat(22), NOW + 300_000, NOW + 2000), "replayed", "durable across a restart");
    const count = () => storage.db.prepare("SELECT count(*) FROM fl_nonce").pluck().get() as number;
    // Once expired, the nonce is pruned (its command would be refused as stale anyway).
    assert.equal(queue.claimNonce("b".repeat(22), NOW + 600_000, NOW + 300_001), "ok");
    assert.equal(count(), 1);
    const fill = storage.db.prepare("INSERT INTO fl_nonce (nonce, expires_at) VALUES (?, ?)");
    storage.db.transaction(() => {
      for (let i = count(); i < MAX_NONCES; i++) fill.run(`fill-${i}`, NOW + 600_000);
    })();
    assert.equal(queue.claimNonce("c".repeat(22), NOW + 600_000, NOW + 300_002), "full");
    assert.equal(count(), MAX_NONCES, "nothing added beyond the bound");
    assert.equal(queue.claimNonce("c".repeat(22), NOW + 900_000, NOW + 600_001), "ok", "room again once they expire");
    storage.stop();
  });
});

test("sitegate fleet sign: prints properties that verify, as JSON or as mosquitto_pub arguments; bad usage exits 2", async () => {
  const { spawnSync } = await import("node:child_process");
  const { writeFileSync } = await import("node:fs");
  const { fileURLToPath } = await import("node:url");
  const cli = join(fileURLToPath(import.meta.url), "../../../src/cli.js");
  await withTmpDir((dir) => {
    writeFileSync(join(dir, "key.pem"), A.priv);
    writeFileSync(join(dir, "body.json"), '{"limit":10}');
    const run = (...args: string[]) => spawnSync(process.execPath, [cli, "fleet", ...args], { encoding: "utf8" });
    const base = ["sign", "--key", join(dir, "key.pem"), "--site", "site-001", "--command", "events", "--body", join(dir, "body.json")];
    const json = run(...base);
    assert.equal(json.status, 0, json.stderr);
    const props = JSON.parse(json.stdout) as Record<string, string>;
    const v = new CommandVerifier([A.pub], 300);
    assert.equal(v.check("site-001", "events", Buffer.from('{"limit":10}'), props, Date.now()).ok, true);
    const mq = run(...base, "--format", "mosquitto");
    assert.equal(mq.status, 0, mq.stderr);
    const words = mq.stdout.trim().split(" ");
    const fromArgs: Record<string, string> = {};
    for (let i = 0; i < words.length; i += 5) {
      assert.deepEqual(words.slice(i, i + 3), ["-D", "publish", "user-property"]);
      fromArgs[words[i + 3]] = words[i + 4];
    }
    assert.equal(v.check("site-001", "events", Buffer.from('{"limit":10}'), fromArgs, Date.now()).ok, true);
    assert.equal(run("sign", "--key", join(dir, "key.pem"), "--site", "site-001", "--command", "reboot").status, 2);
    const notAKey = run("sign", "--key", join(dir, "body.json"), "--site", "site-001", "--command", "ping");
    assert.equal(notAKey.status, 2);
    assert.match(notAKey.stderr, /--key/);
  });
});
