// Wrong API keys are counted per source before scrypt runs: past
// KEY_IP_FAILURES a minute a source's unknown keys are refused unchecked, a key already
// verified still passes, and the count is the source's own (other sources, and the token
// endpoint, are not locked by it). Clock injected.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Credentials, KEY_IP_FAILURES } from "../../src/api/auth.js";
import { testConfig, TEST_API_KEY } from "../support/config.js";
import { scryptLoad } from "../../src/util/secret-hash.js";

test(`API keys: ${KEY_IP_FAILURES} wrong keys sent together from one source, then its unknown keys wait unchecked; a verified key still passes`, async () => {
  let now = 1_000_000;
  const creds = new Credentials(testConfig("/tmp/sitegate-unit"), () => now);
  assert.deepEqual(await creds.checkApiKey(TEST_API_KEY, "10.0.0.1"), { result: "ok" });
  // Sent together: each is counted before its scrypt runs, so none slips past the count.
  const guesses = await Promise.all(Array.from({ length: KEY_IP_FAILURES + 5 }, (_, i) => creds.checkApiKey(`guess-${i}`, "10.0.0.9")));
  assert.equal(guesses.filter((g) => g.result === "wrong").length, KEY_IP_FAILURES);
  assert.equal(guesses.filter((g) => g.result === "wait").length, 5);
  const next = creds.checkApiKey("guess-x", "10.0.0.9");
  assert.equal(scryptLoad().running, 0, "no scrypt for a waiting source");
  const waited = await next;
  assert.equal(waited.result, "wait");
  assert.ok(waited.result === "wait" && waited.retryAfterS >= 1 && waited.retryAfterS <= 60);
  // The verified key passes from the locked source; another source is not locked.
  assert.deepEqual(await creds.checkApiKey(TEST_API_KEY, "10.0.0.9"), { result: "ok" });
  assert.deepEqual(await creds.checkApiKey("guess-y", "10.0.0.2"), { result: "wrong" });
  // A minute later the source's keys are checked again.
  now += 60_001;
  assert.deepEqual(await creds.checkApiKey("guess-z", "10.0.0.9"), { result: "wrong" });
});

test("API keys: the right key sent by a source is not counted against it", async () => {
  const creds = new Credentials(testConfig("/tmp/sitegate-unit"), () => 0);
  for (let i = 0; i < KEY_IP_FAILURES - 1; i++) assert.equal((await creds.checkApiKey(`guess-${i}`, "10.0.0.9")).result, "wrong");
  assert.equal((await creds.checkApiKey(TEST_API_KEY, "10.0.0.9")).result, "ok");
  assert.equal((await creds.checkApiKey("guess-last", "10.0.0.9")).result, "wrong", "the 10th failure is still checked");
});
