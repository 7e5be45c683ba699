// SMA battery limits: on the Sunny Tripower Smart Energy (device class 8001) 30231 is the
// AC rating; the battery's maximum charge / discharge power is at 40189 / 40191. Driven
// against the simulator's SMA model in-process (hw-sim/models/brands/sma-storage.ts): a
// 5 kW battery behind a 10 kW rating shows 5,000 W in device sync, and a larger setpoint
// is written as 5,000 W at 40149. The Sunny Boy Storage (8007) has no such registers
// (NaN): its rating stands.
import { test } from "node:test";
import assert from "node:assert/strict";
import { SiteModel } from "../../hw-sim/site-model.js";
import { deviceSchema, type BrandSpec } from "../../hw-sim/scenario.js";
import { buildBrandDevices } from "../../hw-sim/models/brands/index.js";
import type { SmaStorage } from "../../hw-sim/models/brands/sma-storage.js";
import { builtinProfiles } from "../../src/profiles/registry.js";
import { Bus, PRIORITY } from "../../src/modbus/bus.js";
import { DeviceDriver } from "../../src/modbus/device/driver.js";
import { ProfileDevice, type ModbusReadings } from "../../src/modbus/device/profile-device.js";
import type { DriverPool } from "../../src/modbus/device/pool.js";
import type { RegisteredDevice } from "../../src/modbus/device/types.js";
import type { Metrics } from "../../src/model/device.js";
import { silentLogger } from "../../src/log.js";
import { transportTo } from "../support/in-process.js";

const LIMITS = ["power_w", "max_charge_power_w", "max_discharge_power_w"] as const;

/** An SMA of that device class, 10 kW rating, 5 kW battery, paired, its latest readings those of a poll. */
async function sma(device_class: 8001 | 8007) {
  const now = Date.UTC(2026, 5, 1, 12, 0);
  const site = new SiteModel(
    { base_load_w: 800, load_noise_pct: 0, pv_irradiance: 0, tz_offset_h: 0, voltage_v: 230, frequency_hz: 50 },
    7,
    () => now,
  );
  const spec = deviceSchema.parse({
    unit: 3,
    name: "sma",
    model: "sma-storage",
    device_class,
    rated_power_w: 10_000,
    max_power_w: 5000,
    capacity_wh: 9800,
    pv_max_w: 0,
  }) as BrandSpec;
  const dev = buildBrandDevices(spec, site)[0] as SmaStorage;
  const bus = new Bus({ kind: "tcp", host: "sim", port: 502 }, silentLogger(), transportTo(dev));
  const driver = new DeviceDriver(bus, 3, builtinProfiles().get("sma-storage"));
  const descriptor = await driver.pair();
  let latest: Metrics = await driver.readMetrics(LIMITS, PRIORITY.control);
  const readings: ModbusReadings = {
    latest: () => latest,
    health: () => undefined,
    confirm: (_id, m) => (latest = { ...latest, ...m }),
    setRemote: () => {},
  };
  const registered = { config: { device_id: "sma" }, descriptor, fully_configured: true, updated_at: "" } as unknown as RegisteredDevice;
  const device = new ProfileDevice(registered, { driverFor: () => driver } as unknown as DriverPool, readings);
  return { dev, device, descriptor, latest: () => latest, close: () => bus.close() };
}

test("Tripower Smart Energy: 30231 is the 10 kW rating; the battery's 5,000 W from 40189/40191 bounds device sync", async () => {
  const h = await sma(8001);
  try {
    assert.equal(h.descriptor.max_power_w, 10_000, "30231, the AC rating");
    assert.equal(h.latest().max_charge_power_w, 5000);
    assert.equal(h.latest().max_discharge_power_w, 5000);
    assert.equal(h.device.descriptor()?.max_power_w, 5000);
  } finally {
    await h.close();
  }
});

test("Tripower Smart Energy: an 8 kW discharge is written as 5,000 W at 40149, and the battery delivers it", async () => {
  const h = await sma(8001);
  try {
    await h.device.power!.setPower("discharge", 8000); // 8000 at 40149 would be refused (exception 3)
    assert.equal(h.dev.setpointW, 5000);
    assert.equal(h.dev.view().power_w, 5000, "the battery's own power (+ discharge)");
  } finally {
    await h.close();
  }
});

test("Sunny Boy Storage: no battery limits (40189/40191 read NaN), its rating stands", async () => {
  const h = await sma(8007);
  try {
    assert.equal(h.latest().max_charge_power_w, undefined);
    assert.equal(h.latest().max_discharge_power_w, undefined);
    assert.equal(h.device.descriptor()?.max_power_w, 10_000);
  } finally {
    await h.close();
  }
});
