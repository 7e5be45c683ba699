// B4 closed loop on the Modbus family's ProfileDevice: a write counts once the device shows
// it. Coils are read back; a write-only action (its steps name a `restore`, SMA 40236 and
// 40793-40799) counts once the power moves as asked within the profile's confirm_window_ms.
// An in-memory register map behind a real Bus and DeviceDriver; the confirmation window
// runs on a fake clock moved by hand.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Bus } from "../../src/modbus/bus.js";
import type { Transport } from "../../src/modbus/transport.js";
import type { Table } from "../../src/modbus/planner.js";
import { DeviceDriver } from "../../src/modbus/device/driver.js";
import type { DriverPool } from "../../src/modbus/device/pool.js";
import { ProfileDevice, type ModbusReadings } from "../../src/modbus/device/profile-device.js";
import type { RegisteredDevice } from "../../src/modbus/device/types.js";
import { fixedProfileSchema } from "../../src/profiles/schema.js";
import { movesAsAsked } from "../../src/model/power.js";
import { silentLogger } from "../../src/log.js";
import { FakeClock } from "../support/fake-clock.js";

const flush = () => new Promise((r) => setImmediate(r));

/** Holding 0: power (s16, positive discharging); 100: mode (2 discharge), 101: watts; coils 0-3. */
class Device implements Transport {
  isOpen = true;
  regs = new Map<number, number>([[0, 0]]);
  coils = [true, true, true, true];
  /** Acknowledges every write and changes nothing (hw-sim's ignore_writes). */
  ignore = false;
  async open() {}
  async close() {}
  async read(_unit: number, table: Table, address: number, count: number) {
    if (table === "coil") return this.coils.slice(address, address + count).map((c) => (c ? 1 : 0));
    return Array.from({ length: count }, (_, i) => this.regs.get(address + i) ?? 0);
  }
  async writeRegisters(_unit: number, address: number, values: number[]) {
    if (this.ignore) return;
    values.forEach((v, i) => this.regs.set(address + i, v));
    this.regs.set(0, this.regs.get(100) === 2 ? (this.regs.get(101) ?? 0) : 0);
  }
  async writeCoils(_unit: number, address: number, values: boolean[]) {
    if (!this.ignore) values.forEach((v, i) => (this.coils[address + i] = v));
  }
}

const battery = fixedProfileSchema.parse({
  name: "write-only-battery",
  kind: "fixed",
  role: "battery",
  max_power_w: 5000,
  capabilities: ["telemetry", "charge", "discharge"],
  confirm_window_ms: 5000,
  points: [{ metric: "power_w", address: 0, type: "s16" }],
  actions: {
    discharge: [
      { address: 100, value: 2, restore: 0 },
      { address: 101, value: "$watts", restore: 0 },
    ],
  },
});

const relay = fixedProfileSchema.parse({
  name: "relay-4",
  kind: "fixed",
  role: "switch",
  capabilities: ["telemetry", "shed", "restore"],
  points: [{ metric: "state", table: "coil", address: 0, length: 4, bitmask: true }],
  actions: { shed: [0, 1, 2, 3].map((address) => ({ table: "coil", address, value: "$off" })) },
});

async function device(profile: typeof battery, role: "battery" | "switch", clock = new FakeClock(0)) {
  const t = new Device();
  const bus = new Bus({ kind: "tcp", host: "127.0.0.1", port: 1 }, silentLogger(), t);
  const driver = new DeviceDriver(bus, 1, profile);
  await driver.pair();
  const latest: Record<string, number> = {};
  const readings: ModbusReadings = {
    latest: () => latest,
    health: () => undefined,
    confirm: (_id, m) => Object.assign(latest, m),
    setRemote: () => {},
  };
  const registered = {
    config: { device_id: "d1" },
    descriptor: { role, device_type: 0, max_power_w: 5000, capabilities: profile.capabilities, profile: profile.name, identity: {} },
    fully_configured: true,
    updated_at: "",
  } as unknown as RegisteredDevice;
  const d = new ProfileDevice(registered, { driverFor: () => driver } as unknown as DriverPool, readings, clock);
  return { t, d, latest, close: () => bus.close() };
}

test("a write-only discharge counts once the battery's power moves as asked", async () => {
  const r = await device(battery, "battery");
  try {
    await r.d.power!.setPower("discharge", 2000);
    assert.equal(r.latest.power_w, 2000, "the reading that confirmed it is the latest value");
  } finally {
    await r.close();
  }
});

test("a write-only discharge counts when the power follows within confirm_window_ms (at 4 s); one that never follows fails with CONTROL_NOT_CONFIRMED once the window ran out", async () => {
  const clock = new FakeClock(0);
  const r = await device(battery, "battery", clock);
  try {
    r.t.ignore = true;
    let out: unknown;
    const done = r.d.power!.setPower("discharge", 2000).then(
      () => (out = "resolved"),
      (e: unknown) => (out = e),
    );
    // The power is read every 500 ms of the clock; the battery does the 4 s after the write.
    for (let i = 0; i < 8; i++) {
      await flush();
      clock.advance(500);
      if (i === 7) r.t.regs.set(0, 2000); // a battery slow to follow
    }
    for (let i = 0; i < 30 && out === undefined; i++) {
      await flush();
      clock.advance(500);
    }
    await done;
    assert.equal(out, "resolved", "a battery that follows within the window is confirmed");

    r.t.regs.set(100, 0);
    r.t.regs.set(0, 0);
    r.latest.power_w = 0;
    r.t.ignore = true;
    out = undefined;
    const failed = r.d.power!.setPower("discharge", 2000).then(
      () => (out = "resolved"),
      (e: unknown) => (out = e),
    );
    for (let i = 0; i < 30 && out === undefined; i++) {
      await flush();
      clock.advance(500);
    }
    await failed;
    const e = out as Error & { code?: string };
    assert.equal(e.code, "CONTROL_NOT_CONFIRMED");
    assert.match(e.message, /discharge 2000 W did not take effect within 5000 ms: the power reads 0 W/);
    assert.ok(clock.mono() >= 5000, "not before the window ran out");
  } finally {
    await r.close();
  }
});

test("a relay's shed counts once its coils read off; one that acknowledges and does not switch fails", async () => {
  const r = await device(relay as unknown as typeof battery, "switch");
  try {
    r.t.ignore = true;
    await assert.rejects(r.d.switch!.switchOff(), /shed did not take effect: coils 0\.\.3 of unit 1 read 1111, written 0000/);
    r.t.ignore = false;
    await r.d.switch!.switchOff();
    assert.deepEqual(r.t.coils, [false, false, false, false]);
  } finally {
    await r.close();
  }
});

test("moving as asked: near the setpoint, or half the way from before", () => {
  assert.equal(movesAsAsked("discharge", 2000, 1950, 0), true);
  assert.equal(movesAsAsked("discharge", 2000, 1100, 0), true);
  assert.equal(movesAsAsked("discharge", 2000, 500, 0), false);
  assert.equal(movesAsAsked("charge", 3000, -2990, 1000), true);
  assert.equal(movesAsAsked("charge", 3000, 1000, 1000), false, "a hybrid still discharging on its own");
  assert.equal(movesAsAsked("discharge", 2000, 0, undefined), false);
});

test("a readable register the battery acknowledges and does not take fails the action, naming it", async () => {
  const readable = fixedProfileSchema.parse({
    ...battery,
    name: "readable-battery",
    actions: {
      discharge: [
        { address: 100, value: 2 },
        { address: 101, value: "$watts" },
      ],
    },
  });
  const r = await device(readable, "battery");
  try {
    r.t.ignore = true;
    await assert.rejects(
      r.d.power!.setPower("discharge", 2000),
      /discharge did not take effect: holding registers 100\.\.100 of unit 1 read 0, written 2/,
    );
    r.t.ignore = false;
    await r.d.power!.setPower("discharge", 2000);
    assert.equal(r.t.regs.get(0), 2000);
  } finally {
    await r.close();
  }
});

test("a battery's poll shows whether it holds its forced mode (profile forced_mode): false once it is back on its own control, undefined when the reading cannot tell", async () => {
  const forced = fixedProfileSchema.parse({
    ...battery,
    name: "mode-battery",
    points: [
      { metric: "power_w", address: 0, type: "s16" },
      { metric: "storage_mode", address: 100 },
    ],
    forced_mode: { metric: "storage_mode", charge: [1, 3], discharge: [2, 3] },
  });
  const r = await device(forced, "battery");
  const plain = await device(battery, "battery");
  try {
    const shows = (direction: "charge" | "discharge", m: Record<string, number>) => r.d.power!.showsForced!(direction, m);
    assert.equal(shows("discharge", { power_w: 2000, storage_mode: 2 }), true);
    assert.equal(shows("charge", { power_w: 2000, storage_mode: 2 }), false, "a discharge is not the charge asked for");
    assert.equal(shows("discharge", { power_w: 2300, storage_mode: 0 }), false, "its revert timer ran out: a hybrid's own discharge");
    assert.equal(shows("discharge", { power_w: 2000 }), undefined, "a reading without the mode (a confirmation read of the power)");
    assert.equal(plain.d.power!.showsForced!("discharge", { power_w: 0, storage_mode: 0 }), undefined, "a profile without forced_mode");
  } finally {
    await r.close();
    await plain.close();
  }
});
