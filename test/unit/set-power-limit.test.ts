// A setpoint above the battery's live limit is never written: the device itself
// (ProfileDevice.setPower) writes at most the limit for the direction, whatever asks it.
// Driven against the simulator's Huawei model in-process (hw-sim/models/brands/
// huawei-sun2000.ts): a 2.5 kW LUNA2000 on a 10 kW SUN2000 publishes 2,500 W at 37046/
// 37048 and refuses (exception 3) a forcible power above it at 47247/47249.
import { test } from "node:test";
import assert from "node:assert/strict";
import { SiteModel } from "../../hw-sim/site-model.js";
import { deviceSchema, type BrandSpec } from "../../hw-sim/scenario.js";
import { buildBrandDevices } from "../../hw-sim/models/brands/index.js";
import type { HuaweiSun2000 } from "../../hw-sim/models/brands/huawei-sun2000.js";
import { builtinProfiles } from "../../src/profiles/registry.js";
import { Bus, PRIORITY } from "../../src/modbus/bus.js";
import { DeviceDriver } from "../../src/modbus/device/driver.js";
import { ProfileDevice, type ModbusReadings } from "../../src/modbus/device/profile-device.js";
import type { DriverPool } from "../../src/modbus/device/pool.js";
import type { RegisteredDevice } from "../../src/modbus/device/types.js";
import type { Metrics } from "../../src/model/device.js";
import { silentLogger } from "../../src/log.js";
import { transportTo } from "../support/in-process.js";

/** A 2.5 kW LUNA2000 on a 10 kW SUN2000, paired, its latest readings those of a poll. */
async function lunaOn10kW() {
  const now = Date.UTC(2026, 5, 1, 12, 0);
  const site = new SiteModel(
    { base_load_w: 800, load_noise_pct: 0, pv_irradiance: 0, tz_offset_h: 0, voltage_v: 230, frequency_hz: 50 },
    7,
    () => now,
  );
  const spec = deviceSchema.parse({
    unit: 1,
    name: "huawei",
    model: "huawei-sun2000",
    rated_power_w: 10_000,
    max_power_w: 2500,
    capacity_wh: 10_000,
    pv_max_w: 0,
  }) as BrandSpec;
  const dev = buildBrandDevices(spec, site)[0] as HuaweiSun2000;
  const profile = { ...builtinProfiles().get("huawei-sun2000"), delay_ms: 0, connect_delay_ms: 0 };
  const bus = new Bus({ kind: "tcp", host: "sim", port: 502 }, silentLogger(), transportTo(dev));
  const driver = new DeviceDriver(bus, 1, profile);
  const descriptor = await driver.pair();
  let latest: Metrics = await driver.readMetrics(["power_w", "max_charge_power_w", "max_discharge_power_w"], PRIORITY.control);
  const readings: ModbusReadings = {
    latest: () => latest,
    health: () => undefined,
    confirm: (_id, m) => (latest = { ...latest, ...m }),
    setRemote: () => {},
  };
  const registered = { config: { device_id: "luna" }, descriptor, fully_configured: true, updated_at: "" } as unknown as RegisteredDevice;
  const device = new ProfileDevice(registered, { driverFor: () => driver } as unknown as DriverPool, readings);
  return { dev, device, latest: () => latest, close: () => bus.close() };
}

test("the model publishes the battery's 2,500 W at 37046/37048, not the inverter's 10 kW", async () => {
  const h = await lunaOn10kW();
  try {
    assert.equal(h.latest().max_charge_power_w, 2500);
    assert.equal(h.latest().max_discharge_power_w, 2500);
    assert.equal(h.device.descriptor()?.max_power_w, 2500);
  } finally {
    await h.close();
  }
});

for (const direction of ["charge", "discharge"] as const)
  test(`setPower: a 4 kW ${direction} on the 2.5 kW battery is written as 2,500 W and the battery delivers it`, async () => {
    const h = await lunaOn10kW();
    try {
      await h.device.power!.setPower(direction, 4000); // refused with exception 3 if 4000 were written
      assert.equal(direction === "charge" ? h.dev.chargePowerW : h.dev.dischargePowerW, 2500);
      const truth = h.dev.view().power_w; // + discharge
      assert.equal(direction === "charge" ? -truth : truth, 2500, `the battery's own power: ${truth} W`);
    } finally {
      await h.close();
    }
  });

test("setPower: a setpoint under the limit is written as asked", async () => {
  const h = await lunaOn10kW();
  try {
    await h.device.power!.setPower("discharge", 1800);
    assert.equal(h.dev.dischargePowerW, 1800);
  } finally {
    await h.close();
  }
});
