// Device sync's max power is the smallest of the inverter's rating and the battery's
// published maximum: a 2.5 kW LUNA on a 10 kW Huawei inverter shows 2,500 W, not 10,000 W.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Bus } from "../../src/modbus/bus.js";
import { idleTransport } from "../support/fake-devices.js";
import { DeviceDriver } from "../../src/modbus/device/driver.js";
import type { DriverPool } from "../../src/modbus/device/pool.js";
import { ProfileDevice, type ModbusReadings } from "../../src/modbus/device/profile-device.js";
import type { RegisteredDevice } from "../../src/modbus/device/types.js";
import { builtinProfiles } from "../../src/profiles/registry.js";
import type { Metrics } from "../../src/model/device.js";
import { silentLogger } from "../../src/log.js";

function huawei(latest: Metrics, profile = "huawei-sun2000") {
  const p = builtinProfiles().get(profile);
  const bus = new Bus({ kind: "tcp", host: "127.0.0.1", port: 1 }, silentLogger(), idleTransport);
  const registered = {
    config: { device_id: "d1" },
    descriptor: { role: "battery", capabilities: [], device_type: 3, max_power_w: 10_000, profile: p.name, identity: {} },
    fully_configured: true,
    updated_at: "",
  } as unknown as RegisteredDevice;
  const readings: ModbusReadings = { latest: () => latest, health: () => undefined, confirm: () => {}, setRemote: () => {} };
  const device = new ProfileDevice(registered, { driverFor: () => new DeviceDriver(bus, 1, p) } as unknown as DriverPool, readings);
  return { device, close: () => bus.close() };
}

test("a 2.5 kW battery on a 10 kW inverter: max power is the battery's 2,500 W", async () => {
  const h = huawei({ max_charge_power_w: 2500, max_discharge_power_w: 2500 });
  try {
    assert.equal(h.device.descriptor()?.max_power_w, 2500);
  } finally {
    await h.close();
  }
});

test("charge and discharge limits differ: the larger one bounds the rating", async () => {
  const h = huawei({ max_charge_power_w: 3000, max_discharge_power_w: 5000 });
  try {
    assert.equal(h.device.descriptor()?.max_power_w, 5000);
  } finally {
    await h.close();
  }
});

test("no limit read (unavailable) or a limit above the rating: the rating stands", async () => {
  for (const latest of [{} as Metrics, { max_charge_power_w: 20_000, max_discharge_power_w: 20_000 }]) {
    const h = huawei(latest);
    try {
      assert.equal(h.device.descriptor()?.max_power_w, 10_000);
    } finally {
      await h.close();
    }
  }
});

for (const profile of ["goodwe-et", "deye-hybrid"]) {
  test(`${profile}: the limit is the BMS current × the live battery voltage (100 A at 51.2 V = 5,120 W)`, async () => {
    const h = huawei({ max_charge_current_a: 100, max_discharge_current_a: 100, battery_voltage_v: 51.2 }, profile);
    try {
      assert.equal(h.device.descriptor()?.max_power_w, 5120);
      assert.equal(h.device.latest().max_discharge_power_w, 5120);
    } finally {
      await h.close();
    }
  });
}

test("the profiles read the battery voltage the A limits need (Deye 587, GoodWe 35180)", () => {
  for (const [name, address] of [
    ["deye-hybrid", 587],
    ["goodwe-et", 35180],
  ] as const) {
    const p = builtinProfiles().get(name);
    assert.ok(p.kind === "fixed" && p.points.some((x) => x.metric === "battery_voltage_v" && x.address === address), name);
  }
});
