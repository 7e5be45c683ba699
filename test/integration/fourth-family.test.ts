// A fourth transport family, registered in one line beside the product's (the daemon's
// `families` option): the daemon's site clock reads it on every tick, its readings land in
// the stored snapshots, and /healthz, the systemd STATUS line and the health monitor count
// its devices as they count every family's. The family lives in test/support/thermometers/.
import { test } from "node:test";
import assert from "node:assert/strict";
import { FAMILIES } from "../../src/parts/families.js";
import type { Snapshot } from "../../src/telemetry/types.js";
import { startGateway } from "../support/gateway.js";
import { withTmpDir } from "../support/tmp.js";
import { until } from "../support/wait.js";
import { thermometers, type Thermometers } from "../support/thermometers/family.js";

test("a test-only fourth family registered in one line is read on the site clock, stored, and counted by /healthz, STATUS and the health monitor", async () => {
  await withTmpDir(async (dir) => {
    const sensors = new Map([
      ["therm-1", 19.5],
      ["therm-2", 22.25],
    ]);
    let family: Thermometers | undefined;
    const gw = await startGateway(dir, {}, { families: [...FAMILIES, thermometers(sensors, (f) => (family = f))] });
    try {
      const snaps: Snapshot[] = [];
      gw.daemon.events.on("snapshot", "test", (s) => void snaps.push(s));
      const both = (s: Snapshot) => ["therm-1", "therm-2"].every((id) => s.devices.some((d) => d.device_id === id));
      await until(() => snaps.filter(both).length >= 2, "two ticks with both thermometers");
      assert.ok(family, "the daemon built the family from its factory");
      for (const s of snaps.filter(both)) assert.ok(family.ticks.includes(s.ts), `snapshot ${s.ts} is a tick the family was read at`);
      assert.deepEqual(
        snaps
          .filter(both)
          .at(-1)!
          .devices.find((d) => d.device_id === "therm-2")?.metrics,
        { temperature_c: 22.25 },
      );

      const h = await gw.call("GET", "/healthz");
      assert.equal(h.status, 200);
      assert.deepEqual(h.json.devices.configured, 2);
      assert.deepEqual(h.json.devices.online, 2);
      assert.deepEqual(h.json.devices.detail.map((d: { device_id: string }) => d.device_id).sort(), ["therm-1", "therm-2"]);
      assert.match(gw.daemon.health.summary(), /^2\/2 devices online,/, "the STATUS line counts the fourth family's devices");
      await until(() => gw.daemon.health.isHealthy, "healthy: its devices were read");

      sensors.delete("therm-1"); // stops answering
      await until(() => gw.daemon.health.summary().startsWith("1/2 devices online,"), "STATUS: one thermometer offline");
      const after = await gw.call("GET", "/healthz");
      const t1 = after.json.devices.detail.find((d: { device_id: string }) => d.device_id === "therm-1");
      assert.equal(t1.online, false);
      assert.equal(t1.last_error, "no answer");
    } finally {
      await gw.stop();
    }
  });
});
