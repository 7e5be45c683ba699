// The reconnect policy of the fleet and Zigbee brokers: exponential from 1 s to a cap with
// full jitter, reset only after a connection has held for a minute; the cap is 5 min for a
// remote broker and 30 s for a loopback one. Pure: a fake monotonic clock and random source.
import { test } from "node:test";
import assert from "node:assert/strict";
import { brokerBackoff, HOLD_MS, LOOPBACK_CAP_MS, ReconnectBackoff, REMOTE_CAP_MS } from "../../src/util/reconnect-backoff.js";

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
