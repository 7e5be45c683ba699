// GuessLimits (src/api/guess-limit.ts) with checks the test holds open: every attempt of a
// burst has passed the limits before the first check answers, which is exactly the race
// scrypt's asynchrony opens. No timing: the checks resolve when the test says so.
import { test } from "node:test";
import assert from "node:assert/strict";
import { GuessLimits, USER_FREE_FAILURES } from "../../src/api/guess-limit.js";
import { FailureThrottle } from "../../src/api/throttle.js";
import { HashBusyError } from "../../src/util/secret-hash.js";

function heldChecks() {
  const waiting: Array<(ok: boolean) => void> = [];
  return {
    started: () => waiting.length,
    check: () => new Promise<boolean>((resolve) => waiting.push(resolve)),
    answerAll: (ok: boolean) => waiting.splice(0).forEach((r) => r(ok)),
  };
}

test("40 attempts in flight at once: one username gets its free failures and one more checked, the rest wait", async () => {
  const now = 1_000_000;
  const g = new GuessLimits(() => now);
  const source = { throttle: new FailureThrottle({ max: 10, windowMs: 60_000, now: () => now }), key: "10.0.0.1", front: "token" as const };
  const h = heldChecks();
  const all = Array.from({ length: 40 }, () => g.attempt(source, "partner", h.check));
  await new Promise((r) => setImmediate(r));
  assert.equal(h.started(), USER_FREE_FAILURES + 1, "checks begun while none had answered");
  h.answerAll(false);
  const results = await Promise.all(all);
  assert.equal(results.filter((r) => r.result === "wrong").length, USER_FREE_FAILURES + 1);
  assert.ok(results.filter((r) => r.result === "wait").every((r) => r.result === "wait" && r.who === "username"));
  assert.equal(g.checked, USER_FREE_FAILURES + 1);
});

test("a right password takes its own count back: a source that logs in often is never locked by its successes", async () => {
  const now = 1_000_000;
  const g = new GuessLimits(() => now);
  const throttle = new FailureThrottle({ max: 3, windowMs: 60_000, now: () => now });
  for (let i = 0; i < 10; i++)
    assert.equal((await g.attempt({ throttle, key: "a", front: "token" }, "partner", async () => true)).result, "ok");
  assert.equal(throttle.retryAfterS("a"), 0);
  for (let i = 0; i < 3; i++)
    assert.equal((await g.attempt({ throttle, key: "a", front: "token" }, `u${i}`, async () => false)).result, "wrong");
  assert.equal(
    (await g.attempt({ throttle, key: "a", front: "token" }, "u9", async () => true)).result,
    "wait",
    "three failures lock the source",
  );
});

test("a check refused as busy tried no password: the source's count is taken back", async () => {
  const now = 1_000_000;
  const g = new GuessLimits(() => now);
  const throttle = new FailureThrottle({ max: 1, windowMs: 60_000, now: () => now });
  const busy = await g.attempt({ throttle, key: "a", front: "token" }, "partner", async () => {
    throw new HashBusyError();
  });
  assert.equal(busy.result, "busy");
  assert.equal(throttle.retryAfterS("a"), 0);
  assert.equal(g.checked, 0);
});

test("the status page and the token endpoint lock a username each for itself: the page's lock never refuses the token endpoint", async () => {
  const now = 1_000_000;
  const g = new GuessLimits(() => now);
  const page = new FailureThrottle({ max: 100, windowMs: 60_000, now: () => now });
  const token = new FailureThrottle({ max: 100, windowMs: 60_000, now: () => now });
  for (let i = 0; i < 12; i++) await g.attempt({ throttle: page, key: `10.0.0.${i}`, front: "page" }, "partner", async () => false);
  const locked = await g.attempt({ throttle: page, key: "10.0.0.99", front: "page" }, "partner", async () => true);
  assert.equal(locked.result, "wait", "the page locks the username at the page");
  const t = await g.attempt({ throttle: token, key: "127.0.0.1", front: "token" }, "partner", async () => true);
  assert.equal(t.result, "ok", "the token endpoint takes the right password");
});
