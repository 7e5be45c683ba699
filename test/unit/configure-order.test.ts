// The configure flow's scheduling (pure logic): devices on different buses are paired in
// parallel, devices on one bus one after another, results in request order.
import { test } from "node:test";
import assert from "node:assert/strict";
import { configureDevices } from "../../src/devices/configure.js";
import { SitegateError } from "../../src/errors.js";
import { silentLogger } from "../../src/log.js";
import type { DeviceConfig } from "../../src/config/device-schema.js";
import type { DeviceConnector, DeviceDescriptor } from "../../src/devices/types.js";
import type { DeviceRegistry } from "../../src/devices/registry.js";

const dev = (id: string, port: number): DeviceConfig => ({
  device_id: id, device_type: "modbus", device_integration: "org/sunspec", mb_type: 2, mb_device_type: 99, mb_ip: "127.0.0.1", mb_port: port, mb_slave_id: 1,
});

test("one bus at a time per bus, buses in parallel, results in request order", async () => {
  const events: string[] = [];
  const connector: DeviceConnector = {
    async pair(c) {
      events.push(`start ${c.device_id}`);
      await new Promise((r) => setImmediate(r)); // a bus round trip: other buses may run meanwhile
      events.push(`end ${c.device_id}`);
      if (c.device_id === "a2") throw new SitegateError("PAIRING_FAILED", "no answer");
      return { role: "meter", device_type: 12, capabilities: ["telemetry"], profile: "sunspec", identity: {} } satisfies DeviceDescriptor;
    },
    async checkWrites() {},
  };
  const stored: string[] = [];
  const registry = { put: (c: DeviceConfig) => stored.push(c.device_id) } as unknown as DeviceRegistry;
  const results = await configureDevices([dev("a1", 1), dev("b1", 2), dev("a2", 1), dev("b2", 2)], { connector, registry, rtuPorts: {}, log: silentLogger() });
  assert.deepEqual(results.map((r) => `${r.device_id}:${r.code ?? r.status}`), ["a1:accepted", "b1:accepted", "a2:PAIRING_FAILED", "b2:accepted"]);
  // Bus 1 (a*) is serial: a1 ends before a2 starts. Bus 2 runs alongside bus 1.
  assert.ok(events.indexOf("end a1") < events.indexOf("start a2"));
  assert.ok(events.indexOf("end b1") < events.indexOf("start b2"));
  assert.ok(events.indexOf("start b1") < events.indexOf("end a1"), "the buses overlap");
  assert.deepEqual(stored.sort(), ["a1", "b1", "b2"], "a device that fails pairing is not stored");
});
