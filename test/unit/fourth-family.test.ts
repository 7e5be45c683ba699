// The site clock asks every family for its readings at each tick, whatever its transport:
// a family that exists only in the tests (test/support/thermometers/) reads on the tick,
// a family that reports on its own gives its latest values, and both land in the tick's
// snapshot with the tick's time. On the injected clock: no real timers, no sleeps.
import { test } from "node:test";
import { z } from "zod";
import assert from "node:assert/strict";
import { SiteDevices } from "../../src/devices/directory.js";
import { SiteClock } from "../../src/telemetry/site-clock.js";
import type { Snapshot } from "../../src/telemetry/types.js";
import { silentLogger } from "../../src/log.js";
import type { Device } from "../../src/model/device.js";
import { FakeClock } from "../support/fake-clock.js";
import { Thermometers } from "../support/thermometers/family.js";

const IV = 1000;
/** Not on a second: each advance by the interval runs one tick. */
const T0 = Date.UTC(2026, 0, 5, 12, 0, 0, 437);
const settle = () => new Promise((r) => setImmediate(r));

/** A device of a family that reports on its own (as Zigbee and GPIO do). */
const reporting = {
  id: "plug",
  info: () => ({ device_id: "plug", family: "reporting", address: "r/plug", fully_configured: true }),
  latest: () => ({ power_w: 42 }),
  health: () => ({ online: true, last_ok_at: null, last_error: null, consecutive_failures: 0, op_mode: 1 }),
} as unknown as Device;

test("a fourth family is read on every tick of the site clock: its readings in each snapshot with the tick's time, its health and latest values", async () => {
  const clock = new FakeClock(T0);
  const sensors = new Map([
    ["t1", 20.5],
    ["t2", 18],
  ]);
  const therm = new Thermometers(sensors);
  const devices = new SiteDevices([therm, { family: "reporting", devices: () => [reporting] }]);
  const snaps: Snapshot[] = [];
  const site = new SiteClock(devices, { append: (s) => void snaps.push(s) }, { intervalMs: IV, log: silentLogger(), clock });
  site.start();
  for (let i = 0; i < 3; i++) {
    clock.advance(IV);
    await settle();
  }
  sensors.delete("t2"); // t2 stops answering
  sensors.set("t1", 21);
  clock.advance(IV);
  await settle();
  await site.stop();

  assert.equal(therm.ticks.length, 4, "asked once a tick");
  assert.deepEqual(
    snaps.map((s) => s.ts),
    therm.ticks,
    "one snapshot a tick, stamped with the tick's time",
  );
  for (const s of snaps.slice(0, 3))
    assert.deepEqual(s.devices.map((d) => d.device_id).sort(), ["plug", "t1", "t2"], "each family's readings in the tick's snapshot");
  assert.deepEqual(snaps[3]!.devices.find((d) => d.device_id === "t1")?.metrics, { temperature_c: 21 });
  assert.ok(!snaps[3]!.devices.some((d) => d.device_id === "t2"), "a thermometer that does not answer is not in the snapshot");
  assert.equal(site.health("t2")?.online, false);
  assert.equal(site.health("t1")?.online, true);
  assert.deepEqual(site.latest("t1"), { temperature_c: 21 });
  assert.equal(site.latestAt("t1"), therm.ticks[3]);
  assert.equal(site.latestAt("t2"), therm.ticks[2]);
  assert.equal(site.stats.readings, 3 * 3 + 2);
  const online = site.metrics().find((m) => m.name === "sitegate_device_online")!;
  assert.deepEqual(
    online.values.map((v) => [v.labels?.device_id, v.value]),
    [
      ["t1", 1],
      ["t2", 0],
      ["plug", 1],
    ],
  );
});

test("a family part that arrives after the next tick is stored on its own with its tick's time; the on-time parts are not held for it", async () => {
  const clock = new FakeClock(T0);
  const releases: Array<() => void> = [];
  const ab = ["a", "b"].map((id) => ({ ...reporting, id, info: () => ({ ...reporting.info(), device_id: id }) }));
  const slow = {
    family: "slow",
    devices: () => ab,
    read: (ts: number) => [
      { source: "fast", readings: [{ device_id: "a", metrics: { v: ts } }] },
      {
        source: "slow",
        readings: new Promise<Array<{ device_id: string; metrics: Record<string, number> }>>((r) => {
          releases.push(() => r([{ device_id: "b", metrics: { v: ts } }]));
        }),
      },
    ],
  };
  const snaps: Snapshot[] = [];
  const site = new SiteClock(
    new SiteDevices([slow]),
    { append: (s) => void snaps.push(s) },
    { intervalMs: IV, log: silentLogger(), clock },
  );
  site.start();
  clock.advance(IV);
  await settle();
  clock.advance(IV); // the first tick's deadline: committed with what arrived
  await settle();
  releases[0]!(); // the first tick's slow part, after its deadline
  await settle();
  releases[1]!(); // the second tick's, before stop() commits it
  await site.stop();
  const t1 = snaps[0]!.ts;
  assert.deepEqual(snaps[0], { ts: t1, devices: [{ device_id: "a", metrics: { v: t1 } }] });
  assert.deepEqual(snaps[1], { ts: t1, devices: [{ device_id: "b", metrics: { v: t1 } }] }, "late, with its tick's time");
  assert.equal(site.stats.late_snapshots, 1);
  const t2 = snaps[2]!.ts;
  assert.deepEqual(snaps[2]!.devices.map((d) => d.device_id).sort(), ["a", "b"], "a part that arrives in time joins its tick");
  assert.equal(t2, t1 + IV);
});

test("the partner's configure entries go to the family that pairs them; a site without one refuses each entry, naming why", async () => {
  const pairs = {
    family: "pairs",
    entrySchema: z.object({ device_id: z.string() }),
    check: () => [],
    configure: async (ds: Array<{ device_id: string }>) =>
      ds.map((d) => ({ device_id: d.device_id, status: "accepted" as const, message: "ok" })),
  };
  const therm = new Thermometers(new Map());
  const entry = { device_id: "m1" } as never;
  const refused = await new SiteDevices([therm]).connector().configure([entry]);
  assert.deepEqual(refused, [
    { device_id: "m1", status: "error", code: "PAIRING_FAILED", message: "no device family of this site pairs configure entries" },
  ]);
  const paired = await new SiteDevices([therm, { family: "pairs", devices: () => [], connector: pairs }]).connector().configure([entry]);
  assert.equal(paired[0]?.status, "accepted");
});
