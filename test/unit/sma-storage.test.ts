// SMA done right (issue 42 item 5): the built-in profile drives the simulator's SMA model
// (hw-sim/models/brands/sma-storage.ts, written apart from the profile from SMA's register
// list) in-process. A NaN is no reading: never 0 W, never a state code; the battery
// management's six registers are written together.
import { test } from "node:test";
import assert from "node:assert/strict";
import { SiteModel } from "../../hw-sim/site-model.js";
import { deviceSchema, type BrandSpec } from "../../hw-sim/scenario.js";
import { buildBrandDevices } from "../../hw-sim/models/brands/index.js";
import { SMA_ENUM_NAN, type SmaStorage } from "../../hw-sim/models/brands/sma-storage.js";
import { builtinProfiles } from "../../src/profiles/registry.js";
import { Bus } from "../../src/modbus/bus.js";
import { DeviceDriver } from "../../src/modbus/device/driver.js";
import { silentLogger } from "../../src/log.js";
import { transportTo } from "../support/in-process.js";
import { planControlWrites } from "../../src/modbus/device/control-values.js";
import type { ActionName } from "../../src/profiles/schema.js";

function smaRig(extra: Record<string, unknown> = {}) {
  const now = Date.UTC(2026, 5, 1, 12, 0);
  const site = new SiteModel(
    { base_load_w: 8000, load_noise_pct: 0, pv_irradiance: 0, tz_offset_h: 0, voltage_v: 230, frequency_hz: 50 },
    7,
    () => now,
  );
  const spec = deviceSchema.parse({ unit: 3, name: "sma", model: "sma-storage", capacity_wh: 9800, ...extra }) as BrandSpec;
  const dev = buildBrandDevices(spec, site)[0] as SmaStorage;
  const bus = new Bus({ kind: "tcp", host: "sim", port: 502 }, silentLogger(), transportTo(dev));
  const driver = new DeviceDriver(bus, 3, builtinProfiles().get("sma-storage"));
  return { dev, driver };
}

/** The profile's action as ModbusDeviceControl writes it: planned, then each step written. */
async function act(d: DeviceDriver, action: ActionName, watts: number): Promise<void> {
  for (const w of await planControlWrites(d, d.profile.actions[action]!, { watts }))
    if (w.table !== "coil") await d.bus.writeRegisters(w.unit ?? d.unit, w.address, w.words, { fn: 16 });
}

for (const action of ["charge", "discharge"] as const)
  test(`sma-storage: a ${action} writes all six battery-management registers, 40801 included`, async () => {
    const { dev, driver } = smaRig();
    await driver.pair();
    dev.gridSetpointW = 1200; // left by another tool
    await act(driver, action, 2000);
    assert.equal(dev.gridSetpointW, 0, "40801 written with the action");
    assert.equal(dev.view().mode, action === "charge" ? "forced-charge" : "forced-discharge");
    assert.equal(dev.view().power_w, action === "charge" ? -2000 : 2000);
  });

for (const action of ["charge", "discharge"] as const)
  test(`sma-storage on a Tripower Smart Energy (device class 8001): a ${action} goes through 40149/40151 with the timeout 41195 set, not the battery management`, async () => {
    const { dev, driver } = smaRig({ device_class: 8001, revert_s: 600 });
    await driver.pair();
    await act(driver, action, 2000);
    const w = action === "charge" ? -2000 : 2000;
    assert.equal(dev.view().mode, action === "charge" ? "forced-charge" : "forced-discharge", "the battery moves as asked");
    assert.equal(dev.view().power_w, w);
    assert.equal(dev.control, 802);
    assert.equal(dev.setpointW, w);
    assert.equal(dev.timeoutS, 60, "41195 set by the action");
    assert.equal(dev.bmsMode, 2424, "the battery management is left alone");
    await act(driver, "release", 0);
    assert.equal(dev.control, 803, "release hands the battery back");
    assert.equal(dev.view().mode, "self-consumption");
  });

test("sma-storage on a Sunny Boy Storage (8007) writes nothing of the Tripower's path", async () => {
  const { dev, driver } = smaRig();
  await driver.pair();
  await act(driver, "charge", 2000);
  assert.equal(dev.control, 803);
  assert.equal(dev.timeoutS, 60);
  assert.equal(dev.bmsMode, 2289);
});

test("sma-storage: with its meter, grid power is import minus feed-in", async () => {
  const { driver } = smaRig();
  const m = await driver.read(["fast", "slow"]);
  assert.equal(m.grid_power_w, 3000, "8 kW of load less the battery's 5 kW, drawn from the grid");
  assert.equal(m.condition, 307);
});

test("sma-storage: without a meter, 30865/30867 read S32 NaN: no grid reading, not 0 W; counters NaN too", async () => {
  const { driver } = smaRig({ meter: false });
  const m = await driver.read(["fast", "slow"]);
  assert.equal("grid_power_w" in m, false, `grid_power_w is no reading, got ${m.grid_power_w}`);
  assert.equal("energy_import_wh" in m, false, `energy_import_wh is no reading, got ${m.energy_import_wh}`);
  assert.equal("energy_export_wh" in m, false);
  assert.equal(typeof m.power_w, "number", "the device's other points read on");
  assert.equal(typeof m.soc_pct, "number");
});

test("sma-storage: condition 0xFFFFFD (ENUM NaN) is no state, not 16777213", async () => {
  const { dev, driver } = smaRig();
  dev.condition = SMA_ENUM_NAN;
  const m = await driver.read(["fast"]);
  assert.equal("condition" in m, false, `condition is no reading, got ${m.condition}`);
  assert.equal(typeof m.power_w, "number");
});
