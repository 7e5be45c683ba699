// Issue 42 item 1 against the simulator over real sockets: a Sungrow SH whose firmware has
// no battery power limits (the brand model's `power_limits: false`: 33046/33047 answer
// exception 2, as the field device did) pairs, stays online with what answers, and lists
// the limits as unavailable in `sitegate read`; with the limits it lists nothing.
import { test } from "node:test";
import assert from "node:assert/strict";
import { withSite, type ScenarioInput } from "../support/site.js";
import { runCli } from "../support/cli.js";
import { Bus } from "../../src/modbus/bus.js";
import { DeviceDriver } from "../../src/modbus/device/driver.js";
import { builtinProfiles } from "../../src/profiles/registry.js";
import { silentLogger } from "../../src/log.js";
import { isSitegateError } from "../../src/errors.js";
import { request } from "undici";
import { tcpDevice, withSiteGateway } from "../support/gateway.js";
import { uiAgent, uiSession } from "../support/ui-session.js";
import { until } from "../support/wait.js";

/** One Sungrow SH-RT on its own TCP port: unit 1 without the limits, unit 2 with them. */
function sungrows(): ScenarioInput {
  const hybrid = { model: "sungrow-sh", rated_power_w: 10000, max_power_w: 5000, capacity_wh: 9600, soc_pct: 60, pv_max_w: 6000 };
  return {
    seed: 3,
    control: { listen: "127.0.0.1:0" },
    site: { base_load_w: 2000, load_noise_pct: 0, pv_irradiance: 0 },
    ports: [
      {
        kind: "tcp",
        listen: "127.0.0.1:0",
        devices: [
          { ...hybrid, unit: 1, name: "old_firmware", power_limits: false },
          { ...hybrid, unit: 2, name: "with_limits" },
        ],
      },
    ],
  } as ScenarioInput;
}

test("a Sungrow without 33046/33047 stays online with what answers; its limits are listed unavailable", async () => {
  await withSite(sungrows(), async (site) => {
    const endpoint = `tcp://127.0.0.1:${site.tcpPorts[0]}`;
    const old = await runCli("read", "--endpoint", endpoint, "--unit", "1", "--profile", "sungrow-sh", "--json");
    assert.equal(old.code, 0, old.stderr);
    const o = JSON.parse(old.stdout);
    assert.equal(typeof o.metrics.power_w, "number");
    const truth = (site.state().devices.old_firmware as { soc_pct: number }).soc_pct;
    assert.ok(Math.abs(o.metrics.soc_pct - truth) <= 0.2, `soc ${o.metrics.soc_pct} vs the simulator's ${truth}`);
    assert.deepEqual(o.unavailable, ["max_charge_power_w", "max_discharge_power_w"]);
    const table = await runCli("read", "--endpoint", endpoint, "--unit", "1", "--profile", "sungrow-sh");
    assert.match(table.stdout, /^max_charge_power_w\s+unavailable$/m);
    const full = await runCli("read", "--endpoint", endpoint, "--unit", "2", "--profile", "sungrow-sh", "--json");
    assert.equal(full.code, 0, full.stderr);
    const f = JSON.parse(full.stdout);
    assert.deepEqual(f.unavailable, []);
    assert.equal(f.metrics.max_discharge_power_w, 5000);
  });
});

test("a profile that requires the limits refuses that Sungrow at pairing, by the point's name", async () => {
  await withSite(sungrows(), async (site) => {
    const bus = new Bus({ kind: "tcp", host: "127.0.0.1", port: site.tcpPorts[0] }, silentLogger());
    try {
      const base = builtinProfiles().get("sungrow-sh");
      assert.equal(base.kind, "fixed");
      const strict = { ...base, points: base.points.map((pt) => (pt.metric === "max_charge_power_w" ? { ...pt, required: true } : pt)) };
      const driver = new DeviceDriver(bus, 1, strict);
      await assert.rejects(
        driver.pair(),
        (e: unknown) =>
          isSitegateError(e, "PAIRING_FAILED") && /lacks max_charge_power_w, which profile sungrow-sh requires/.test((e as Error).message),
      );
      assert.equal(driver.paired, false);
      // The same profile pairs the firmware that has them.
      await new DeviceDriver(bus, 2, strict).pair();
    } finally {
      await bus.close();
    }
  });
});

test("the unavailable limits are left out of the next polls (the device answers every read after the first)", async () => {
  await withSite(sungrows(), async (site) => {
    const bus = new Bus({ kind: "tcp", host: "127.0.0.1", port: site.tcpPorts[0] }, silentLogger());
    try {
      const driver = new DeviceDriver(bus, 1, builtinProfiles().get("sungrow-sh"));
      await driver.pair();
      for (let i = 0; i < 3; i++) {
        const m = await driver.read(["fast", "slow"]);
        assert.equal(typeof m.soc_pct, "number");
        assert.ok(!("max_charge_power_w" in m));
      }
      assert.deepEqual(
        driver.unavailable.list().map((u) => u.reason),
        ["illegal address", "illegal address"],
      );
      assert.ok(
        driver.plan(["fast", "slow"]).blocks.every((b) => b.address !== 33046),
        "left out of the plan",
      );
    } finally {
      await bus.close();
    }
  });
});

/** Four StorEdges on one TCP port: meter at its default base, none, shifted +50 and +70. */
function storEdges(): ScenarioInput {
  const hybrid = { model: "solaredge-storedge", rated_power_w: 10000, max_power_w: 5000, capacity_wh: 9700, soc_pct: 60, pv_max_w: 6000 };
  const meters = ["default", "none", "shift50", "shift70"] as const;
  return {
    seed: 3,
    control: { listen: "127.0.0.1:0" },
    site: { base_load_w: 2000, load_noise_pct: 0, pv_irradiance: 0 },
    ports: [
      { kind: "tcp", listen: "127.0.0.1:0", devices: meters.map((meter, i) => ({ ...hybrid, unit: i + 1, name: `se_${meter}`, meter })) },
    ],
  } as ScenarioInput;
}

test("a SolarEdge reads its meter at 40188, +50 or +70, and without a meter works on with the grid points unavailable", async () => {
  await withSite(storEdges(), async (site) => {
    const bus = new Bus({ kind: "tcp", host: "127.0.0.1", port: site.tcpPorts[0] }, silentLogger());
    try {
      const gridNow = () => (site.state() as unknown as { site: { grid_w: number } }).site.grid_w;
      for (const [unit, meter] of [
        [1, "default"],
        [2, "none"],
        [3, "shift50"],
        [4, "shift70"],
      ] as const) {
        const driver = new DeviceDriver(bus, unit, builtinProfiles().get("solaredge-storedge"));
        await driver.pair();
        const m = await driver.read(["fast", "slow"]);
        assert.equal(typeof m.power_w, "number", `${meter}: ${JSON.stringify(m)}`);
        assert.equal(typeof m.soc_pct, "number", `${meter}: ${JSON.stringify(m)}`);
        if (meter === "none") {
          assert.ok(!("grid_power_w" in m), `${meter}: ${JSON.stringify(m)}`);
          assert.deepEqual(
            driver.unavailable.list().map((u) => u.metric),
            ["energy_export_wh", "energy_import_wh", "grid_power_w"],
          );
        } else {
          const grid = gridNow();
          assert.ok(Math.abs(grid) > 100, `the site's grid is not idle: ${grid}`);
          assert.ok(
            Math.abs(m.grid_power_w - grid) <= Math.max(20, Math.abs(grid) * 0.05),
            `${meter}: grid_power_w ${m.grid_power_w} vs ${grid}`,
          );
          assert.deepEqual(driver.unavailable.list(), [], meter);
        }
      }
    } finally {
      await bus.close();
    }
  });
});

test("the daemon keeps that Sungrow online and its status page lists the unavailable limits", async () => {
  await withSiteGateway(
    sungrows(),
    (site) => ({
      ui: { enabled: true },
      telemetry: { poll_interval_ms: 500, retention_max_mb: 64 },
      devices: [tcpDevice("bat", site.tcpPorts[0], 1, "sungrow-sh")] as never,
    }),
    async (_site, gw) => {
      const cookie = await uiSession(gw.url);
      type Row = { device_id: string; online: boolean; metrics: Record<string, number>; unavailable_points: string[] };
      const bat = async (): Promise<Row | undefined> => {
        const r = await request(`${gw.url}/ui/api/devices`, { headers: { cookie }, dispatcher: uiAgent });
        return ((await r.body.json()) as { devices: Row[] }).devices.find((d) => d.device_id === "bat");
      };
      await until(async () => (await bat())?.unavailable_points.length === 2, "the limits listed unavailable on the status page", 30_000);
      const row = (await bat())!;
      assert.equal(row.online, true);
      assert.deepEqual(row.unavailable_points, ["max_charge_power_w", "max_discharge_power_w"]);
      assert.equal(typeof row.metrics.soc_pct, "number");
    },
  );
});
