// The configure flow's rules that need no bus (pure logic): which role a device
// gets from discovery and mb_device_type, and when a baud asked for clashes with an RTU port's.
import { test } from "node:test";
import assert from "node:assert/strict";
import { baudConflict, resolveRole } from "../../src/modbus/device/pairing.js";
import type { DeviceConfig } from "../../src/modbus/config-schema.js";
import type { DeviceRegistry } from "../../src/modbus/device/registry.js";
import type { RegisteredDevice } from "../../src/modbus/device/types.js";

test("mb_device_type decides where discovery cannot tell; discovery wins a disagreement, with a note", () => {
  assert.equal(resolveRole(1, "unknown").role, "meter");
  assert.equal(resolveRole(2, "unknown").role, "pv");
  assert.equal(resolveRole(3, "unknown").role, "battery");
  assert.match(resolveRole(1, "unknown").note ?? "", /device_type 12 from mb_device_type 1 \(meter\): the device does not tell its type/);
  assert.deepEqual(resolveRole(99, "unknown"), { role: "unknown" });
  for (const [declared, found] of [
    [1, "meter"],
    [2, "pv"],
    [3, "battery"],
    [99, "switch"],
  ] as const)
    assert.deepEqual(resolveRole(declared, found), { role: found });
  const clash = resolveRole(1, "battery");
  assert.equal(clash.role, "battery");
  assert.match(
    clash.note ?? "",
    /mb_device_type 1 \(meter\) disagrees with the device, which reports itself as storage inverter; device_type 10 is used/,
  );
  assert.match(resolveRole(99, "pv").note ?? "", /mb_device_type 99 \(others\) disagrees/);
  assert.match(resolveRole(3, "switch").note ?? "", /on\/off switch/);
});

test("a baud that differs from the one the port's other devices use clashes; the port's only device may change it", () => {
  const rtu = (id: string, port: number, baud: number): DeviceConfig => ({
    device_id: id,
    device_type: "modbus",
    device_integration: "org/sdm630",
    mb_type: 1,
    mb_device_type: 1,
    mb_slave_id: 10,
    mb_baud: baud,
    mb_rtu_no: port,
  });
  const held: RegisteredDevice[] = [rtu("a", 1, 9600), rtu("b", 1, 9600), rtu("c", 2, 19200)].map((config) => ({
    config,
    descriptor: null,
    fully_configured: true,
    updated_at: "",
  }));
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
