// The guessing throttles (src/api/throttle.ts, the status page's LoginThrottle), the
// Authorization header parsing and cookie decoding. Pure logic with an injected clock.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Backoff, FailureThrottle, LruMap, sourceKey } from "../../src/api/throttle.js";
import { LoginThrottle, parseCookies } from "../../src/ui/session.js";
import { basicClientId } from "../../src/api/token.js";
import { bearerToken, splitAuthorization } from "../../src/api/headers.js";
import { FakeClock } from "../support/fake-clock.js";

test("source keys: IPv4 per address (IPv4-mapped too), IPv6 per /64 whatever its spelling", () => {
  assert.equal(sourceKey("192.0.2.7"), "192.0.2.7");
  assert.equal(sourceKey("::ffff:192.0.2.7"), "192.0.2.7");
  const k = sourceKey("2001:db8:1:2::1");
  assert.equal(k, "2001:db8:1:2::/64");
  for (const same of ["2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:0db8:0001:0002:0:0:0:9", "2001:DB8:1:2::abcd", "2001:db8:1:2::1.2.3.4"])
    assert.equal(sourceKey(same), k, same);
  assert.notEqual(sourceKey("2001:db8:1:3::1"), k);
  assert.equal(sourceKey("fe80::1%eth0"), sourceKey("fe80::2"));
  assert.equal(sourceKey("::1"), "0:0:0:0::/64");
});

test("status page throttle: IPv6 addresses of one /64 share a counter", () => {
  const clock = new FakeClock(0);
  const t = new LoginThrottle(5, 60_000, () => clock.now());
  for (let i = 1; i <= 5; i++) t.fail(`2001:db8:1:2::${i.toString(16)}`);
  assert.ok(t.retryAfterS("2001:db8:1:2::ffff") > 0, "another address of the same /64 is locked too");
  assert.equal(t.retryAfterS("2001:db8:1:3::1"), 0, "the next /64 is not");
});

test("status page throttle: filling the table from many addresses does not unlock a locked one", () => {
  const clock = new FakeClock(0);
  const t = new LoginThrottle(5, 15 * 60_000, () => clock.now());
  for (let i = 0; i < 5; i++) t.fail("10.0.0.1");
  assert.ok(t.retryAfterS("10.0.0.1") > 0);
  // Whoever tries as the plugin does: only a source not refused gets to fail.
  for (let i = 0; i < 5000; i++) {
    const ip = `10.1.${i >> 8}.${i & 255}`;
    if (t.retryAfterS(ip) === 0) t.fail(ip);
  }
  assert.ok(t.retryAfterS("10.0.0.1") > 0, "still locked after 5000 other sources");
  assert.ok(t.globalExhausted(), "the global budget stopped the filling");
  assert.ok(t.retryAfterS("10.9.9.9") > 0, "and every source now waits");
  assert.ok(t.size <= 1024);
});

test("status page throttle without the global budget: the LRU drops unlocked sources before a locked one", () => {
  const clock = new FakeClock(0);
  const t = new LoginThrottle(5, 15 * 60_000, () => clock.now(), { capacity: 64, globalMax: Infinity });
  for (let i = 0; i < 5; i++) t.fail("10.0.0.1");
  for (let i = 0; i < 5000; i++) t.fail(`10.1.${i >> 8}.${i & 255}`);
  assert.ok(t.retryAfterS("10.0.0.1") > 0, "the locked source survived 5000 others");
  assert.equal(t.size, 64, "bounded");
  clock.advance(15 * 60_000 + 1);
  assert.equal(t.retryAfterS("10.0.0.1"), 0, "free once its failures leave the window");
});

test("global failure budget: N failures from N sources lock everyone until they age out", () => {
  const clock = new FakeClock(0);
  const t = new FailureThrottle({ max: 5, windowMs: 60_000, globalMax: 20, now: () => clock.now() });
  for (let i = 0; i < 20; i++) t.fail(`k${i}`);
  assert.equal(t.retryAfterS("fresh"), 60);
  clock.advance(30_000);
  assert.equal(t.retryAfterS("fresh"), 30);
  clock.advance(30_001);
  assert.equal(t.retryAfterS("fresh"), 0);
});

test("LRU map: bounded, least recently used disposable entry goes first", () => {
  const m = new LruMap<number>(3, (v) => v < 10);
  m.set("a", 99);
  m.set("b", 1);
  m.set("c", 2);
  m.set("d", 3); // b (oldest disposable) goes, a (not disposable) stays
  assert.deepEqual(
    ["a", "b", "c", "d"].map((k) => m.peek(k)),
    [99, undefined, 2, 3],
  );
  m.get("c");
  m.set("e", 4); // d is now the least recent disposable
  assert.deepEqual(
    ["a", "c", "d", "e"].map((k) => m.peek(k)),
    [99, 2, undefined, 4],
  );
});

test("username backoff: free failures, then 1 s, 2 s, 4 s ... capped; a success clears it", () => {
  const clock = new FakeClock(0);
  const b = new Backoff({ free: 3, baseMs: 1000, maxMs: 8000, forgetMs: 3_600_000, now: () => clock.now() });
  for (let i = 0; i < 3; i++) {
    b.fail("partner");
    assert.equal(b.retryAfterS("partner"), 0);
  }
  const waits: number[] = [];
  for (let i = 0; i < 6; i++) {
    b.fail("partner");
    waits.push(b.retryAfterS("partner"));
    clock.advance(waits[i] * 1000);
  }
  assert.deepEqual(waits, [1, 2, 4, 8, 8, 8]);
  assert.equal(b.retryAfterS("other"), 0, "per username");
  b.fail("partner");
  b.succeed("partner");
  assert.equal(b.retryAfterS("partner"), 0);
});

test("a Cookie header that is not valid percent-encoding does not throw", () => {
  assert.deepEqual({ ...parseCookies("a=%") }, { a: "%" });
  assert.deepEqual({ ...parseCookies("sg_session=abc; bad=%E0%A4%A; ok=a%20b") }, { sg_session: "abc", bad: "%E0%A4%A", ok: "a b" });
  assert.deepEqual({ ...parseCookies(undefined) }, {});
});

test("Authorization parsing: a long run of spaces is refused, not backtracked; Basic and Bearer still parse", () => {
  for (const n of [100, 1000, 16_000]) {
    const r = basicClientId(`Basic${" ".repeat(n)}x y`);
    assert.ok(r && "refused" in r, `${n} spaces`);
  }
  assert.deepEqual(basicClientId(`Basic ${Buffer.from("partner-portal:").toString("base64")}`), { id: "partner-portal" });
  assert.deepEqual(basicClientId(`basic   ${Buffer.from("partner-portal:").toString("base64")}  `), { id: "partner-portal" });
  assert.equal(basicClientId("Bearer abc"), null);
  assert.equal(basicClientId("Basicx"), null);
  assert.ok("refused" in basicClientId("Basic %%%")!);
  assert.ok("refused" in basicClientId("Basic%%%")!);
  assert.ok("refused" in basicClientId("Basic")!);
  assert.equal(bearerToken("Bearer abc.def"), "abc.def");
  assert.equal(bearerToken("bearer\tabc"), "abc");
  assert.equal(bearerToken(`Bearer${" ".repeat(16_000)}a b`), null);
  assert.equal(bearerToken("Bearer a b"), null);
  assert.equal(bearerToken("Basic abc"), null);
  assert.deepEqual(splitAuthorization("  "), { scheme: "", rest: "" });
});
