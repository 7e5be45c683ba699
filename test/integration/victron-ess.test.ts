// The Victron GX delivers the requested power at any house load (issue 42, item 3): the
// profile drives the Multi in ESS mode 3 through its VE.Bus power setpoint (37), which
// the house load does not move, where the grid setpoint 2700 of modes 1/2 made the battery
// cover the load on top. Each event is driven as the dispatch ledger drives it (capture
// the pre-event state, set the power, write the state back, read it back); the truth is
// the simulator's battery power (GET /state power_w), never the gateway's reading.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startSim, type SimHandle } from "../../hw-sim/sim.js";
import type { ScenarioInput } from "../../hw-sim/scenario.js";
import { dec, enc } from "../../hw-sim/models/brands/register-map.js";
import { Bus } from "../../src/modbus/bus.js";
import { DeviceDriver } from "../../src/modbus/device/driver.js";
import { ProfileDevice, type ModbusReadings } from "../../src/modbus/device/profile-device.js";
import type { RegisteredDevice } from "../../src/modbus/device/types.js";
import type { DeviceConfig } from "../../src/modbus/config-schema.js";
import { builtinProfiles } from "../../src/profiles/registry.js";
import { silentLogger } from "../../src/log.js";
import { isSitegateError } from "../../src/errors.js";
import { until } from "../support/wait.js";

const VEBUS = 227;
/** Delivered within 5 % of the request (the simulator's Multi has no losses). */
const TOLERANCE = 0.05;

/** One GX (system unit 100, VE.Bus 227) on a site whose whole house load it sees, no PV. */
function gxSite(loadW: number, essMode: number): ScenarioInput {
  return {
    control: { listen: "127.0.0.1:0" },
    site: { base_load_w: loadW, load_noise_pct: 0, pv_irradiance: 0 },
    ports: [
      {
        kind: "tcp",
        listen: "127.0.0.1:0",
        devices: [
          {
            model: "victron-gx",
            unit: 100,
            name: "gx",
            vebus_unit: VEBUS,
            ess_mode: essMode,
            max_power_w: 5000,
            capacity_wh: 10000,
            soc_pct: 50,
            pv_max_w: 0,
            self_use_load_pct: 100,
          },
        ],
      },
    ],
  } as ScenarioInput;
}

const NOON = Date.UTC(2026, 10, 28, 12);

async function withGx(
  loadW: number,
  essMode: number,
  fn: (site: SimHandle, bus: Bus) => Promise<void>,
  clock: () => number = () => NOON,
): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "sitegate-victron-"));
  // The site's clock stands still unless the test moves it: the Multi's 60 s setpoint
  // timeout cannot run out mid-test on its own.
  const site = await startSim(gxSite(loadW, essMode), { baseDir: dir, clock });
  const bus = new Bus({ kind: "tcp", host: "127.0.0.1", port: site.tcpPorts[0]! }, silentLogger());
  try {
    await fn(site, bus);
  } finally {
    await bus.close();
    await site.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The simulator's own record of the GX (GET /state): battery power W (+ = discharging), and the site's grid. */
async function truth(site: SimHandle): Promise<{ power_w: number; ess_mode: number; grid_w: number }> {
  const body = (await (await fetch(`${site.controlUrl}/state`)).json()) as {
    devices: Record<string, Record<string, any>>;
    site: Record<string, any>;
  };
  return { power_w: body.devices.gx!.power_w, ess_mode: body.devices.gx!.ess_mode, grid_w: body.site.grid_w };
}

const NO_READINGS: ModbusReadings = { latest: () => undefined, health: () => undefined, confirm: () => {}, setRemote: () => {} };

function gxDevice(bus: Bus): ProfileDevice {
  const driver = new DeviceDriver(bus, VEBUS, builtinProfiles().get("victron-gx"));
  const config = { device_id: "victron-gx", rated_power_w: 5000 } as DeviceConfig;
  const registered: RegisteredDevice = { config, descriptor: null, fully_configured: true, updated_at: "" };
  return new ProfileDevice(registered, { driverFor: () => driver }, NO_READINGS);
}

for (const loadW of [0, 800]) {
  test(`victron-gx at ${loadW} W of house load: a 1.5 kW charge and a 2 kW discharge deliver the request by the simulator's battery power`, async () => {
    await withGx(loadW, 3, async (site, bus) => {
      const dev = gxDevice(bus);
      const before = await truth(site);
      assert.equal(before.grid_w, loadW, "the house load is on the grid before the event");

      let pre = await dev.capture("charge");
      await dev.power!.setPower("charge", 1500);
      const charging = (await truth(site)).power_w;
      assert.ok(Math.abs(-charging - 1500) <= 1500 * TOLERANCE, `charges 1500 W at ${loadW} W load: battery ${charging} W`);

      pre = await dev.capture("discharge", pre);
      await dev.power!.setPower("discharge", 2000);
      const discharging = await truth(site);
      assert.ok(
        Math.abs(discharging.power_w - 2000) <= 2000 * TOLERANCE,
        `discharges 2000 W at ${loadW} W load: battery ${discharging.power_w} W`,
      );
      assert.equal(discharging.grid_w, loadW - 2000, "the house load moves the grid, not the battery");
      await dev.revert(pre);
      assert.equal(await dev.verify(pre), undefined);
    });
  });
}

test("victron-gx: the release puts the GX back in the ESS mode and at the mode-3 setpoint it had, read back from the device", async () => {
  await withGx(800, 3, async (site, bus) => {
    // Another controller (or the installer) left a setpoint of 300 W on the Multi.
    await bus.writeRegisters(VEBUS, 37, enc.s16(300), { fn: 16 });
    const dev = gxDevice(bus);
    const pre = await dev.capture("discharge");
    await dev.power!.setPower("discharge", 2000);
    assert.equal(dec.s16((await bus.read(VEBUS, "holding", 37, 1))[0]!), -2000, "the event's setpoint is on the Multi");
    await dev.handBack();
    assert.equal(dec.s16((await bus.read(VEBUS, "holding", 37, 1))[0]!), 0, "the release idles the Multi");
    await dev.revert(pre);
    assert.equal(await dev.verify(pre), undefined);
    assert.equal(dec.s16((await bus.read(VEBUS, "holding", 37, 1))[0]!), 300, "the setpoint it had");
    assert.equal((await bus.read(100, "holding", 2902, 1))[0], 3, "the ESS mode it had");
    assert.equal((await truth(site)).ess_mode, 3);
    assert.equal((await truth(site)).power_w, -300, "the battery follows the setpoint it had");
  });
});

for (const mode of [1, 2]) {
  test(`victron-gx pairing refuses ESS mode ${mode} by name: the profile needs mode 3 (external control)`, async () => {
    await withGx(800, mode, async (_site, bus) => {
      const driver = new DeviceDriver(bus, VEBUS, builtinProfiles().get("victron-gx"));
      const name = mode === 1 ? "optimized_phase_compensation" : "optimized";
      await assert.rejects(driver.pair(), (e: unknown) => {
        assert.ok(isSitegateError(e) && e.code === "DEVICE_MISMATCH", String(e));
        assert.match((e as Error).message, new RegExp(`ess_mode .*reads ${mode} \\(${name}\\).*3 \\(external_control\\)`));
        return true;
      });
    });
  });
}

test("victron-gx: rewritten every refresh_s, the mode-3 setpoint outlives the Multi's 60 s timeout; without a rewrite it drops", async () => {
  let now = NOON;
  await withGx(
    800,
    3,
    async (site, bus) => {
      const dev = gxDevice(bus);
      const refreshMs = dev.power!.refreshMs;
      assert.ok(refreshMs > 0 && refreshMs < 60_000, `refresh ${refreshMs} ms within the 60 s timeout`);
      await dev.power!.setPower("discharge", 2000);
      // As the dispatcher does: the same setpoint again every refresh, for 4 minutes of the site's clock.
      for (let t = 0; t < 240_000; t += refreshMs) {
        now += refreshMs;
        await until(async () => (await truth(site)).power_w === 2000, "the site's clock moved with the Multi still discharging", 10_000);
        await dev.power!.setPower("discharge", 2000);
      }
      assert.equal((await truth(site)).power_w, 2000, "held through the refreshes");
      now += 61_000;
      await until(async () => (await truth(site)).power_w === 0, "the Multi dropping the setpoint 60 s after the last write", 10_000);
    },
    () => now,
  );
});
