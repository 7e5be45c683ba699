// scrypt off the event loop (src/util/secret-hash.ts): password checks let other callbacks
// run, at most SCRYPT_CONCURRENCY run at once, and a full queue refuses instead of growing.
import { test } from "node:test";
import assert from "node:assert/strict";
import { scryptSync, randomBytes } from "node:crypto";
import { Credentials } from "../../src/api/auth.js";
import { HashBusyError, MAX_WAITING, SCRYPT_CONCURRENCY, scryptLoad, verifySecretAsync } from "../../src/util/secret-hash.js";
import { testConfig, TEST_PASSWORD } from "../support/config.js";

/** An scrypt hash with a small N: cheap enough to queue a hundred in a test. */
function cheapHash(secret: string): string {
  const salt = randomBytes(16);
  return `scrypt$1024$8$1$${salt.toString("base64")}$${scryptSync(secret, salt, 32, { N: 1024, r: 8, p: 1 }).toString("base64")}`;
}

test("password checks run off the event loop: other callbacks run while scrypt works", async () => {
  const creds = new Credentials(testConfig("/tmp/sitegate-unit"));
  for (const [user, password, expect] of [
    ["partner", TEST_PASSWORD, true],
    ["partner", "wrong", false],
    ["nobody", "x", false],
  ] as const) {
    const check = creds.checkPassword(user, password);
    let turns = 0;
    const spin = () => {
      turns++;
      if (turns < 1000) setImmediate(spin);
    };
    setImmediate(spin);
    assert.equal(await check, expect);
    assert.ok(turns > 0, `the event loop turned while ${user}/${password} was checked`);
  }
});

test(`at most ${SCRYPT_CONCURRENCY} scrypt checks at once; past ${MAX_WAITING} waiting, a check is refused as busy`, async () => {
  const hash = cheapHash("s3cret");
  const checks = Array.from({ length: SCRYPT_CONCURRENCY + MAX_WAITING }, (_, i) => verifySecretAsync(i === 0 ? "s3cret" : "wrong", hash));
  assert.deepEqual(scryptLoad(), { running: SCRYPT_CONCURRENCY, waiting: MAX_WAITING });
  await assert.rejects(verifySecretAsync("s3cret", hash), HashBusyError);
  const results = await Promise.all(checks);
  assert.equal(results.filter(Boolean).length, 1);
  assert.deepEqual(scryptLoad(), { running: 0, waiting: 0 });
  assert.equal(await verifySecretAsync("s3cret", hash), true, "free again");
});
