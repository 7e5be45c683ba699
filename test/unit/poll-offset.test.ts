// Polls spread over the interval: each site ticks at a stable offset derived from its
// site_id, so a fleet of NTP-synced gateways does not read and publish in the same few
// hundred ms of every second; a snapshot is stamped with its tick's instant, offset
// included (DESIGN B6). On the injected clock: no real timers, no sleeps.
import { test } from "node:test";
import assert from "node:assert/strict";
import { modbusSiteClock } from "../support/modbus-clock.js";
import { tickOffsetMs } from "../../src/telemetry/tick-offset.js";
import type { DriverPool } from "../../src/modbus/device/pool.js";
import type { DeviceSource, RegisteredDevice } from "../../src/modbus/device/types.js";
import type { Snapshot } from "../../src/telemetry/types.js";
import { FakeClock } from "../support/fake-clock.js";
import { silentLogger } from "../../src/log.js";

const IV = 1000;
/** Not on a second: the first tick is the next second plus the offset after this. */
const T0 = Date.UTC(2026, 0, 5, 12, 0, 0, 437);

/** A poller with one device whose reads note the clock's time they were started at. */
function site(siteId: string, clock: FakeClock) {
  const device = { config: { device_id: "m1" }, fully_configured: true } as RegisteredDevice;
  const readsAt: number[] = [];
  const driver = {
    bus: { key: "tcp:sim" },
    profile: { slow_interval_ms: 60_000 },
    read: () => {
      readsAt.push(clock.now());
      return Promise.resolve({ power_w: 100 + readsAt.length });
    },
    opMode: () => 1,
  };
  const source: DeviceSource = { list: () => [device], get: () => device };
  const pool = { driverFor: () => driver } as unknown as DriverPool;
  const snaps: Snapshot[] = [];
  const poller = modbusSiteClock(source, { append: (s) => void snaps.push(s) }, pool, {
    intervalMs: IV,
    log: silentLogger(),
    siteId,
    clock,
  });
  return { poller, snaps, readsAt };
}

/** Lets the reads' promises settle (they resolve at once; no time passes). */
const settle = () => new Promise((r) => setImmediate(r));

test("two site_ids get different offsets, the same on every call, within the interval", () => {
  const a = tickOffsetMs("site-001", IV);
  const b = tickOffsetMs("site-002", IV);
  assert.notEqual(a, b);
  assert.equal(tickOffsetMs("site-001", IV), a, "stable");
  for (const o of [a, b]) assert.ok(o >= 0 && o < IV, `${o} in [0, ${IV})`);
  // Pinned: a release that changed the hash would move every site's ticks.
  assert.deepEqual([a, b], [804, 189]);
  // Spread: 200 sites cover the interval, not one corner of it.
  const offsets = Array.from({ length: 200 }, (_, i) => tickOffsetMs(`site-${i}`, IV));
  const tenths = new Set(offsets.map((o) => Math.floor(o / 100)));
  assert.equal(tenths.size, 10, "every tenth of the interval holds some of 200 sites' ticks");
});

test("ticks land at each second plus the site's offset, and each snapshot is stamped with its tick's instant", async () => {
  for (const siteId of ["site-001", "site-002"]) {
    const clock = new FakeClock(T0);
    const { poller, snaps, readsAt } = site(siteId, clock);
    const offset = tickOffsetMs(siteId, IV);
    assert.equal(poller.offsetMs, offset);
    poller.start();
    for (let i = 0; i < 5; i++) {
      clock.advance(IV);
      await settle();
    }
    await poller.stop();
    assert.equal(readsAt.length, 5, `${siteId}: one read a tick`);
    const first = Math.ceil((T0 - offset) / IV) * IV + offset;
    assert.deepEqual(
      readsAt,
      [0, 1, 2, 3, 4].map((k) => first + k * IV),
      `${siteId}: the reads start at second + ${offset} ms`,
    );
    for (const at of readsAt) assert.equal(((at % IV) + IV) % IV, offset);
    assert.deepEqual(
      snaps.map((s) => s.ts),
      readsAt,
      `${siteId}: each snapshot's timestamp is the instant its tick ran`,
    );
    assert.equal(poller.latestAt("m1"), readsAt.at(-1));
  }
});

test("without a site_id the ticks stay on the interval grid", async () => {
  const clock = new FakeClock(T0);
  const device = { config: { device_id: "m1" }, fully_configured: true } as RegisteredDevice;
  const snaps: Snapshot[] = [];
  const driver = { bus: { key: "b" }, profile: { slow_interval_ms: 60_000 }, read: () => Promise.resolve({ power_w: 1 }), opMode: () => 1 };
  const poller = modbusSiteClock(
    { list: () => [device], get: () => device },
    { append: (s) => void snaps.push(s) },
    { driverFor: () => driver } as unknown as DriverPool,
    { intervalMs: IV, log: silentLogger(), clock },
  );
  poller.start();
  clock.advance(IV);
  await settle();
  await poller.stop();
  assert.deepEqual(
    snaps.map((s) => s.ts),
    [Math.ceil(T0 / IV) * IV],
  );
});
