// The confirmation read after a setpoint write, through the real device layer on the
// injected clock: the dispatcher, the Modbus family's ProfileDevice, a DeviceDriver with a small fixed
// battery profile, a Bus over an in-memory transport, and the poller's latest values.
// No poll runs in these tests: whatever reaches the latest values came from the
// confirmation read. No sleeps: the fake clock is moved by hand.
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { Bus, PRIORITY, type Priority } from "../../src/modbus/bus.js";
import type { Transport } from "../../src/modbus/transport.js";
import type { Table } from "../../src/modbus/planner.js";
import { DeviceDriver } from "../../src/modbus/device/driver.js";
import type { DriverPool } from "../../src/modbus/device/pool.js";
import type { DeviceSource, RegisteredDevice } from "../../src/modbus/device/types.js";
import { fixedProfileSchema } from "../../src/profiles/schema.js";
import { ModbusFamily } from "../../src/modbus/device/family.js";
import { SiteDevices } from "../../src/devices/directory.js";
import { planned } from "../../src/dispatch/devices.js";
import { Dispatcher } from "../../src/dispatch/dispatcher.js";
import { DISPATCH_MIGRATIONS } from "../../src/dispatch/store.js";
import { dispatchRequest } from "../../src/dispatch/request.js";
import { ModbusPolling } from "../../src/modbus/device/polling.js";
import { openDatabase, migrate } from "../../src/storage/db.js";
import { FakeClock } from "../support/fake-clock.js";
import { silentLogger } from "../../src/log.js";
import { makeTmpDir } from "../support/tmp.js";

const T0 = Date.UTC(2026, 10, 22, 12, 0, 0);
const POWER = 0; // holding register of power_w
const MODE = 100; // 0 automatic, 2 discharge; 101: the rate in percent of 5 kW
const flush = () => new Promise((r) => setImmediate(r));
const settle = async () => {
  for (let i = 0; i < 20; i++) await flush();
};

/** A battery as a register map: its power follows the mode and rate registers at once. */
class BatteryTransport implements Transport {
  isOpen = true;
  regs = new Map<number, number>([
    [POWER, 0],
    [1, 50],
    [MODE, 0],
    [MODE + 1, 0],
  ]);
  log: string[] = [];
  /** Reads of the power register fail (a device that stops answering after a write). */
  failPower = false;
  async open() {}
  async close() {}
  async read(_unit: number, _table: Table, address: number, count: number) {
    this.log.push(`read ${address}+${count}`);
    if (this.failPower && address === POWER) throw Object.assign(new Error("Timed out"), { name: "TransactionTimedOutError" });
    return Array.from({ length: count }, (_, i) => this.regs.get(address + i) ?? 0);
  }
  async writeRegisters(_unit: number, address: number, values: number[]) {
    this.log.push(`write ${address}=${values.join(",")}`);
    values.forEach((v, i) => this.regs.set(address + i, v));
    this.regs.set(POWER, this.regs.get(MODE) === 2 ? Math.round(((this.regs.get(MODE + 1) ?? 0) / 100) * 5000) : 0);
  }
  async writeCoils() {
    throw new Error("no coils");
  }
}

const profile = fixedProfileSchema.parse({
  name: "test-battery",
  kind: "fixed",
  role: "battery",
  max_power_w: 5000,
  capabilities: ["telemetry", "charge", "discharge"],
  points: [
    { metric: "power_w", address: POWER, type: "s16" },
    { metric: "soc_pct", address: 1 },
  ],
  actions: {
    discharge: [
      { address: MODE, value: 2 },
      { address: MODE + 1, value: "$pct", range: [0, 100] },
    ],
    release: [{ address: MODE, value: 0 }],
  },
});

async function rig() {
  const t = new BatteryTransport();
  const bus = new Bus({ kind: "tcp", host: "127.0.0.1", port: 1 }, silentLogger(), t);
  // Every request with the lane it was queued in.
  const lanes: Array<{ op: string; address: number; priority: Priority }> = [];
  const read = bus.read.bind(bus);
  bus.read = (unit, table, address, count, opts = {}) => {
    lanes.push({ op: "read", address, priority: opts.priority ?? PRIORITY.poll });
    return read(unit, table, address, count, opts);
  };
  const writeRegisters = bus.writeRegisters.bind(bus);
  bus.writeRegisters = (unit, address, values, opts = {}) => {
    lanes.push({ op: "write", address, priority: opts.priority ?? PRIORITY.control });
    return writeRegisters(unit, address, values, opts);
  };
  const driver = new DeviceDriver(bus, 1, profile);
  await driver.pair();
  t.log = [];
  lanes.length = 0;
  const device: RegisteredDevice = {
    config: { device_id: "b1" } as RegisteredDevice["config"],
    descriptor: {
      role: "battery",
      device_type: 10,
      max_power_w: 5000,
      capabilities: ["telemetry", "charge", "discharge"],
      profile: profile.name,
      identity: {},
    },
    fully_configured: true,
    updated_at: new Date(T0).toISOString(),
  };
  const source: DeviceSource & { version: number } = { list: () => [device], get: (id) => (id === "b1" ? device : undefined), version: 0 };
  const pool = { driverFor: () => driver } as unknown as DriverPool;
  // The family's real polling holds the latest values the status page and the API read; no
  // site clock runs in this test, so it knows the device but never polls.
  const poller = new ModbusPolling(source, pool, { intervalMs: 1000, log: silentLogger() });
  const view = {
    health: () => ({ online: true, last_ok_at: null, last_error: null, consecutive_failures: 0, op_mode: 1 as const }),
    latest: (id: string) => poller.latest(id),
    confirm: (id: string, m: Record<string, number>) => poller.confirm(id, m),
    setRemote: (id: string, on: boolean) => poller.setRemote(id, on),
  };
  const devices = new SiteDevices([new ModbusFamily(source, pool, view)]);
  const tmp = makeTmpDir();
  const db = openDatabase(tmp.dir);
  migrate(db, [DISPATCH_MIGRATIONS]);
  const clock = new FakeClock(T0);
  const d = new Dispatcher({ db: () => db, devices, clock, log: silentLogger(), pollIntervalMs: 1000, respond: () => {} });
  void d.start(); // plans at once; only a put-back at start is awaited
  return {
    t,
    lanes,
    poller,
    devices,
    clock,
    d,
    async close() {
      await d.stop();
      await bus.close();
      db.close();
      tmp.cleanup();
    },
  };
}

function discharge(kw: number) {
  return dispatchRequest.parse({
    mode: "live",
    event_slots: [
      {
        event_id: randomUUID(),
        start_time: new Date(T0 + 10_000).toISOString(),
        end_time: new Date(T0 + 70_000).toISOString(),
        event_type: "discharge",
        event_quantity: kw,
        event_unit: "kW",
        priority: 10,
        mandatory: false,
        cancelled: false,
      },
    ],
  });
}

test("after a setpoint write the battery's power is read once, in the control lane, right after the write; the latest values show it before any poll", async () => {
  const r = await rig();
  try {
    r.d.submit(discharge(2.5));
    assert.equal(r.poller.latest("b1")?.power_w, undefined, "nothing read before the event");
    r.clock.advance(10_000); // start_time: the write goes out; no poll runs
    await settle();
    // On the wire: the ledger's pre-event state, the setpoint and its read-back (a write
    // counts once the device shows it), then one read of the power point.
    assert.deepEqual(r.t.log, ["read 100+1", "read 101+1", "write 100=2", "write 101=50", "read 100+1", "read 101+1", "read 0+1"]);
    const power = r.lanes.filter((x) => x.op === "read" && x.address === POWER);
    assert.equal(power.length, 1, "one confirmation read");
    assert.equal(power[0].priority, PRIORITY.control, "queued in the control lane, ahead of every poll");
    assert.ok(
      r.lanes.every((x) => x.priority === PRIORITY.control),
      JSON.stringify(r.lanes),
    );
    assert.equal(r.poller.latest("b1")?.power_w, 2500, "the latest values (status page, API) have the setpoint");
    assert.equal(planned(r.devices)[0].metrics.power_w, 2500, "and so has dispatch's view of the device");
    assert.equal(r.clock.now(), T0 + 10_000, "at the write's instant, not a poll later");
    assert.deepEqual([r.d.stats.confirms_ok, r.d.stats.confirms_failed], [1, 0]);

    // The release at end_time puts the battery back; it is not a setpoint and is not confirmed.
    r.clock.advance(60_000);
    await settle();
    assert.equal(r.t.log.filter((x) => x === "read 0+1").length, 1, "still one: no setpoint written since");
    assert.equal(r.t.regs.get(MODE), 0, "released");
  } finally {
    await r.close();
  }
});

test("a confirmation read that fails is counted and logged; the write stands and the event keeps its device", async () => {
  const r = await rig();
  try {
    r.t.failPower = true;
    r.d.submit(discharge(2));
    r.clock.advance(10_000);
    await settle();
    assert.deepEqual(
      r.t.log,
      ["read 100+1", "read 101+1", "write 100=2", "write 101=40", "read 100+1", "read 101+1", "read 0+1"],
      "one attempt, no retry",
    );
    assert.deepEqual([r.d.stats.writes_ok, r.d.stats.writes_failed], [1, 0]);
    assert.deepEqual([r.d.stats.confirms_ok, r.d.stats.confirms_failed], [0, 1]);
    assert.equal(r.poller.latest("b1")?.power_w, undefined);
    assert.equal(r.t.regs.get(MODE), 2, "the setpoint stays");
    assert.equal(r.d.running(), 1);
  } finally {
    await r.close();
  }
});
