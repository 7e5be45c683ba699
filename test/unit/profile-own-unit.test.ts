// A profile writes only to its own device (DESIGN B9): a write step's unit is the device's
// own or one of the profile's declared sub_units, never unit 0 (broadcast). The schema
// refuses such a profile; the device layer refuses such a write at run time too (a profile
// made in code, a ledger row written before the rule), and nothing reaches the wire.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Bus } from "../../src/modbus/bus.js";
import type { Transport } from "../../src/modbus/transport.js";
import { DeviceDriver } from "../../src/modbus/device/driver.js";
import type { DriverPool } from "../../src/modbus/device/pool.js";
import { ProfileDevice, type ModbusReadings } from "../../src/modbus/device/profile-device.js";
import type { RegisteredDevice } from "../../src/modbus/device/types.js";
import { fixedProfileSchema, profileSchema } from "../../src/profiles/schema.js";
import { isSitegateError } from "../../src/errors.js";
import { silentLogger } from "../../src/log.js";
import { issuesToDetails } from "../../src/util/zod-issues.js";

const switchProfile = (shed: Array<Record<string, unknown>>, extra: Record<string, unknown> = {}) => ({
  name: "site-switch",
  kind: "fixed",
  role: "switch",
  capabilities: ["telemetry", "shed", "restore"],
  points: [{ metric: "state", table: "coil", address: 0 }],
  actions: { shed },
  ...extra,
});

function problems(raw: unknown): Array<{ path: string; message: string }> {
  const r = profileSchema.safeParse(raw);
  return r.success ? [] : issuesToDetails(r.error.issues);
}

test("a profile whose write step names unit 0 or an undeclared unit is refused; a declared sub-device is accepted", () => {
  assert.deepEqual(problems(switchProfile([{ table: "coil", address: 0, value: "$off", unit: 0 }])), [
    { path: "actions.shed[0].unit", message: "unit 0 is the broadcast address: a profile never writes to it" },
  ]);
  assert.deepEqual(problems(switchProfile([{ table: "coil", address: 0, value: "$off", unit: 2 }])), [
    { path: "actions.shed[0].unit", message: "is not one of the profile's sub_units: a profile writes only to its own device" },
  ]);
  assert.ok(
    problems(switchProfile([{ table: "coil", address: 0, value: "$off", unit: 0 }], { sub_units: [0] })).length > 0,
    "0 is no sub-device",
  );
  assert.deepEqual(problems(switchProfile([{ table: "coil", address: 0, value: "$off", unit: 2 }], { sub_units: [2] })), []);
  assert.deepEqual(problems(switchProfile([{ table: "coil", address: 0, value: "$off" }])), [], "no unit: the device's own");
});

/** Coils by unit: what was written where; a coil reads what was last written to it (1 before). */
class CoilTransport implements Transport {
  isOpen = true;
  writes: string[] = [];
  private readonly coils = new Map<string, number>();
  async open() {}
  async close() {}
  async read(unit: number, _table: unknown, address: number, count: number) {
    return Array.from({ length: count }, (_, i) => this.coils.get(`${unit}/${address + i}`) ?? 1);
  }
  async writeRegisters(unit: number, address: number, values: number[]) {
    this.writes.push(`${unit}/holding:${address}=${values.join(",")}`);
  }
  async writeCoils(unit: number, address: number, values: boolean[]) {
    this.writes.push(`${unit}/coil:${address}=${values.map(Number).join(",")}`);
    values.forEach((v, i) => this.coils.set(`${unit}/${address + i}`, Number(v)));
  }
}

function rig(subUnits: number[] = []) {
  const t = new CoilTransport();
  const bus = new Bus({ kind: "tcp", host: "127.0.0.1", port: 1 }, silentLogger(), t);
  const profile = fixedProfileSchema.parse(switchProfile([{ table: "coil", address: 0, value: "$off" }], { sub_units: subUnits }));
  // A step with another unit, as a profile made in code (past the schema) would have it.
  const hostile = {
    ...profile,
    actions: {
      shed: [
        {
          table: "coil" as const,
          address: 0,
          value: "$off" as const,
          unit: 5,
          word_order: "big" as const,
          scale: 1,
          type: "u16" as const,
          count: 1,
          flash: false,
        },
      ],
    },
  };
  const driver = new DeviceDriver(bus, 7, hostile);
  const registered = {
    config: { device_id: "sw1" },
    descriptor: null,
    fully_configured: true,
    updated_at: "",
  } as unknown as RegisteredDevice;
  const readings = { latest: () => ({}), health: () => ({}), confirm() {}, setRemote() {} } as unknown as ModbusReadings;
  const device = new ProfileDevice(registered, { driverFor: () => driver } as unknown as DriverPool, readings);
  return { t, device };
}

const refused = (e: unknown) => isSitegateError(e, "CONTROL_VALUE_INVALID") && /unit \d+ is refused/.test((e as Error).message);

test("at run time a write to another unit or unit 0 is refused before it reaches the wire; the device's own unit is written", async () => {
  const { t, device } = rig();
  await assert.rejects(device.switch!.switchOff(), refused, "the shed step names unit 5, which the profile does not declare");
  await assert.rejects(
    device.revert([{ table: "coil", address: 0, unit: 0, words: [], coils: [true] }]),
    refused,
    "a ledger row for unit 0",
  );
  await assert.rejects(device.revert([{ table: "coil", address: 0, unit: 9, words: [], coils: [true] }]), refused);
  assert.deepEqual(t.writes, [], "nothing was written");
  await device.revert([{ table: "coil", address: 0, words: [], coils: [true] }]);
  await device.revert([{ table: "coil", address: 1, unit: 7, words: [], coils: [true] }]);
  assert.deepEqual(t.writes, ["7/coil:0=1", "7/coil:1=1"]);
});

test("a declared sub-device may be written", async () => {
  const { t, device } = rig([5]);
  await device.switch!.switchOff();
  assert.deepEqual(t.writes, ["5/coil:0=0"]);
});
