// The configure flow's rules that need no bus (pure logic): which device_type a device
// gets from discovery and mb_device_type, and when a baud asked for clashes with an RTU port's.
import { test } from "node:test";
import assert from "node:assert/strict";
import { baudConflict, resolveDeviceType } from "../../src/devices/configure.js";
import type { DeviceConfig } from "../../src/config/device-schema.js";
import type { DeviceRegistry } from "../../src/devices/registry.js";
import type { RegisteredDevice } from "../../src/devices/types.js";

test("mb_device_type decides where discovery cannot tell; discovery wins a disagreement, with a note", () => {
  assert.deepEqual(resolveDeviceType(1, 0).device_type, 12);
  assert.deepEqual(resolveDeviceType(2, 0).device_type, 11);
  assert.deepEqual(resolveDeviceType(3, 0).device_type, 10);
  assert.match(resolveDeviceType(1, 0).note ?? "", /device_type 12 from mb_device_type 1 \(meter\): the device does not tell its type/);
  assert.deepEqual(resolveDeviceType(99, 0), { device_type: 0 });
  for (const [declared, found] of [[1, 12], [2, 11], [3, 10], [99, 14]]) assert.deepEqual(resolveDeviceType(declared, found), { device_type: found });
  const clash = resolveDeviceType(1, 10);
  assert.equal(clash.device_type, 10);
  assert.match(clash.note ?? "", /mb_device_type 1 \(meter\) disagrees with the device, which reports itself as storage inverter; device_type 10 is used/);
  assert.match(resolveDeviceType(99, 11).note ?? "", /mb_device_type 99 \(others\) disagrees/);
  assert.match(resolveDeviceType(3, 14).note ?? "", /on\/off switch/);
});

test("a baud that differs from the one the port's other devices use clashes; the port's only device may change it", () => {
  const rtu = (id: string, port: number, baud: number): DeviceConfig => ({
    device_id: id, device_type: "modbus", device_integration: "org/sdm630", mb_type: 1, mb_device_type: 1, mb_slave_id: 10, mb_baud: baud, mb_rtu_no: port,
  });
  const held: RegisteredDevice[] = [rtu("a", 1, 9600), rtu("b", 1, 9600), rtu("c", 2, 19200)].map((config) => ({ config, descriptor: null, fully_configured: true, updated_at: "" }));
  const registry = { list: () => held } as unknown as DeviceRegistry;
  const rtuPorts = {
    "1": { path: "/dev/ttyA", baud: 9600, parity: "none" as const, stop_bits: 1 as const },
    "2": { path: "/dev/ttyB", baud: 9600, parity: "none" as const, stop_bits: 1 as const },
  };
  const deps = { registry, rtuPorts };
  const msg = baudConflict(rtu("new", 1, 19200), deps);
  assert.match(msg ?? "", /mb_baud 19200 differs from the 9600 baud of RTU port 1 \(\/dev\/ttyA\), which a, b use/);
  assert.match(baudConflict(rtu("a", 1, 19200), deps) ?? "", /which b uses/, "a's own entry does not count, b's does");
  assert.equal(baudConflict(rtu("new", 1, 9600), deps), null);
  assert.equal(baudConflict(rtu("c", 2, 9600), deps), null, "c is port 2's only device");
});
