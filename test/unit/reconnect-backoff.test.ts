// The one retry policy of the fleet and Zigbee brokers and the partner's HTTPS lanes:
// exponential from 1 s to a cap with full jitter, reset only after a connection has held for
// a minute (or a message was accepted); the cap is 5 min for a remote endpoint and 30 s for a
// loopback one. Pure: a fake monotonic clock and random source.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  brokerBackoff,
  HOLD_MS,
  laneRetryDelay,
  LOOPBACK_CAP_MS,
  ReconnectBackoff,
  REMOTE_CAP_MS,
  retryDelayMs,
  urlBackoff,
} from "../../src/util/reconnect-backoff.js";

function policy(host: string, rand: () => number) {
  let now = 0;
  const b = new ReconnectBackoff(brokerBackoff(host), () => now, rand);
  return { b, advance: (ms: number) => (now += ms) };
}

test("the ceiling doubles from 1 s per failure up to 5 min for a remote broker", () => {
  const { b } = policy("fleet.example", () => 0.999_999);
  const delays = Array.from({ length: 12 }, () => b.next());
  assert.deepEqual(
    delays.map((d) => Math.round(d / 1000)),
    [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300],
  );
  assert.equal(REMOTE_CAP_MS, 300_000);
});

test("a loopback broker (the local zigbee2mqtt) is capped at 30 s", () => {
  for (const host of ["127.0.0.1", "localhost", "::1"]) {
    const { b } = policy(host, () => 0.999_999);
    const delays = Array.from({ length: 8 }, () => b.next());
    assert.equal(Math.max(...delays), LOOPBACK_CAP_MS - 1, host);
  }
});

test("full jitter: a uniform draw between 0 and the ceiling", () => {
  const draws = [0, 0.5, 0.25, 0.999];
  let i = 0;
  const { b } = policy("fleet.example", () => draws[i++]!);
  assert.deepEqual([b.next(), b.next(), b.next(), b.next()], [0, 1000, 1000, 7992]);
});

test("a connection that held under a minute does not reset the ceiling; one that held a minute does", () => {
  const { b, advance } = policy("fleet.example", () => 0.999_999);
  for (let n = 0; n < 5; n++) b.next(); // ceilings 1, 2, 4, 8, 16 s
  b.connected();
  advance(HOLD_MS - 1);
  assert.equal(Math.round(b.next() / 1000), 32, "a broker that accepts and drops within a minute keeps the backoff growing");
  b.connected();
  advance(HOLD_MS);
  assert.equal(Math.round(b.next() / 1000), 1, "held a minute: back to 1 s");
});

test("200 gateways that lose the broker at once: attempts fall as the outage goes on", () => {
  // Deterministic random source; attempts counted per 10 s bucket over a 120 s outage.
  let seed = 42;
  const rand = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
  const buckets = Array<number>(12).fill(0);
  for (let g = 0; g < 200; g++) {
    const b = new ReconnectBackoff(brokerBackoff("fleet.example"), () => 0, rand);
    for (let t = b.next(); t < 120_000; t += b.next()) buckets[Math.floor(t / 10_000)]!++;
  }
  assert.ok(buckets[0]! > 4 * buckets[11]!, `first 10 s ${buckets[0]} attempts, last 10 s ${buckets[11]}`);
  const total = buckets.reduce((a, x) => a + x, 0);
  // A fixed 1-3 s period makes 200 x 120 / 2 = 12,000.
  assert.ok(total < 2000, `${total} attempts in 120 s`);
});

// The partner's HTTPS lanes and the fleet's refused publishes retry a message on the same
// policy: retry n waits a uniform draw below the ceiling after n - 1 failures, capped by the
// endpoint's host. (Before, the lanes had a twin of their own: 1 s doubling to 5 min with
// ±20 % jitter around the ceiling, 5 min for a partner on this machine too.)
test("a message's retries: full jitter below 1 s doubling, 5 min for a remote partner, 30 s for one on this machine", () => {
  const top = () => 0.999_999;
  const remote = urlBackoff("https://partner.example/v1/callbacks");
  const local = urlBackoff("https://127.0.0.1:8443/v1/callbacks");
  assert.deepEqual(
    [1, 2, 3, 10, 30].map((n) => Math.round(retryDelayMs(remote, n, top) / 1000)),
    [1, 2, 4, 300, 300],
  );
  assert.equal(Math.max(...[1, 5, 10, 30, 60].map((n) => retryDelayMs(local, n, top))), LOOPBACK_CAP_MS - 1);
  for (const n of [1, 3, 30])
    assert.equal(
      retryDelayMs(remote, n, () => 0),
      0,
      `retry ${n} may go at once`,
    );
});

test("a message's retry delays spread evenly between 0 and the ceiling (not ±20 % around it)", () => {
  let seed = 7;
  const rand = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
  const p = urlBackoff("https://partner.example/");
  const delays = Array.from({ length: 4000 }, () => retryDelayMs(p, 4, rand)); // ceiling 8 s
  const quarter = [0, 0, 0, 0];
  for (const d of delays) quarter[Math.floor(d / 2000)]!++;
  for (const q of quarter) assert.ok(q > 800 && q < 1200, `quarters of 0-8 s: ${quarter.join(", ")}`);
  assert.ok(Math.max(...delays) < 8000);
});

test("the lanes' default: the address's host picks the cap; a topic or anything not a URL is remote", () => {
  assert.equal(urlBackoff("https://[::1]:9000/x").capMs, LOOPBACK_CAP_MS);
  assert.equal(urlBackoff("https://localhost/x").capMs, LOOPBACK_CAP_MS);
  assert.equal(urlBackoff("https://127.evil.example/x").capMs, REMOTE_CAP_MS);
  assert.equal(urlBackoff("telemetry").capMs, REMOTE_CAP_MS);
  for (let i = 0; i < 200; i++) {
    assert.ok(laneRetryDelay(40, "https://127.0.0.1/x") < LOOPBACK_CAP_MS);
    assert.ok(laneRetryDelay(1, "https://partner.example/x") < 1000);
  }
});
