// Device sync serializes its answer once and serves it again while the devices' state is
// the same (src/api/gateway.ts). The state includes what a battery publishes live: its
// charge and discharge limits lower its max power (battery-limit.test.ts), so a cached
// answer must not keep the old figure once the battery publishes a new one.
import { test } from "node:test";
import assert from "node:assert/strict";
import Fastify from "fastify";
import { Bus } from "../../src/modbus/bus.js";
import { idleTransport } from "../support/fake-devices.js";
import { DeviceDriver } from "../../src/modbus/device/driver.js";
import type { DriverPool } from "../../src/modbus/device/pool.js";
import { ProfileDevice, type ModbusReadings } from "../../src/modbus/device/profile-device.js";
import type { RegisteredDevice } from "../../src/modbus/device/types.js";
import { builtinProfiles } from "../../src/profiles/registry.js";
import type { DeviceHealth, Metrics } from "../../src/model/device.js";
import { silentLogger } from "../../src/log.js";
import { gatewayRoutes } from "../../src/api/gateway.js";
import type { ApiContext } from "../../src/api/context.js";

const ONLINE: DeviceHealth = {
  online: true,
  last_ok_at: "2026-01-01T00:00:00.000Z",
  last_error: null,
  consecutive_failures: 0,
  op_mode: 1,
};

test("device sync follows a battery's live limits: a lower published maximum is served at once, not the cached figure", async () => {
  const p = builtinProfiles().get("huawei-sun2000");
  const bus = new Bus({ kind: "tcp", host: "127.0.0.1", port: 1 }, silentLogger(), idleTransport);
  const registered = {
    config: { device_id: "bat" },
    descriptor: { role: "battery", capabilities: [], device_type: 3, max_power_w: 10_000, profile: p.name, identity: {} },
    fully_configured: true,
    updated_at: "",
  } as unknown as RegisteredDevice;
  let latest: Metrics = { max_charge_power_w: 5000, max_discharge_power_w: 5000 };
  let health = ONLINE;
  const readings: ModbusReadings = { latest: () => latest, health: () => health, confirm: () => {}, setRemote: () => {} };
  const driver = new DeviceDriver(bus, 1, p);
  const device = new ProfileDevice(registered, { driverFor: () => driver } as unknown as DriverPool, readings);
  const ctx = {
    config: { site_id: "site-001" },
    devices: { list: () => [device], get: () => device, version: 1 },
  } as unknown as ApiContext;
  const app = Fastify();
  await app.register(gatewayRoutes(ctx));
  const sync = async () => {
    const r = await app.inject({ method: "GET", url: "/v1/api/gateway/site-001/devicesync" });
    assert.equal(r.statusCode, 200);
    const d = (r.json() as { devices: Array<{ device_max_power?: number; device_op_mode?: number }> }).devices[0]!;
    return [d.device_max_power, d.device_op_mode];
  };
  try {
    assert.deepEqual(await sync(), [5000, 1]);
    latest = { max_charge_power_w: 2500, max_discharge_power_w: 2500 }; // the BMS lowers its limits
    assert.deepEqual(await sync(), [2500, 1]);
    health = { ...ONLINE, op_mode: 2 };
    assert.deepEqual(await sync(), [2500, 2]);
    health = { ...ONLINE, online: false, consecutive_failures: 1, last_error: "timeout" };
    assert.deepEqual(await sync(), [2500, 4], "unreachable: fault");
    health = ONLINE;
    assert.deepEqual(await sync(), [2500, 1]);
  } finally {
    await app.close();
    await bus.close();
  }
});
