// Issue 39 finding 4, B4 "Closed loop": a device action of several writes that the device
// refuses part-way puts back the writes already made, in the same tick, and the device is
// listed with the refusal; a rollback refused in turn becomes an unreleased ledger row,
// retried like any release. Through the real device layer on an injected clock: the
// dispatcher, the Modbus family's ProfileDevice, a DeviceDriver with a Sungrow-like
// three-step profile (EMS mode, forced command, power), and a Bus over an in-memory transport.
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { Bus } from "../../src/modbus/bus.js";
import type { Transport } from "../../src/modbus/transport.js";
import type { Table } from "../../src/modbus/planner.js";
import { DeviceDriver } from "../../src/modbus/device/driver.js";
import type { DriverPool } from "../../src/modbus/device/pool.js";
import type { DeviceSource, RegisteredDevice } from "../../src/modbus/device/types.js";
import { fixedProfileSchema } from "../../src/profiles/schema.js";
import { ModbusFamily } from "../../src/modbus/device/family.js";
import { SiteDevices } from "../../src/devices/directory.js";
import { Dispatcher, type ExecutionResponse } from "../../src/dispatch/dispatcher.js";
import { DISPATCH_MIGRATIONS } from "../../src/dispatch/store.js";
import { dispatchRequest } from "../../src/dispatch/request.js";
import { openDatabase, migrate } from "../../src/storage/db.js";
import { FakeClock } from "../support/fake-clock.js";
import { silentLogger } from "../../src/log.js";
import { makeTmpDir } from "../support/tmp.js";

const T0 = Date.UTC(2026, 10, 22, 12, 0, 0);
const POWER = 0; // input-like power reading, in a holding register here
const MODE = 100; // EMS mode: 0 self-consumption, 2 forced
const CMD = 101; // forced command: 0xCC stop, 0xBB discharge
const SET = 102; // forced power in W
const settle = async () => {
  for (let i = 0; i < 30; i++) await new Promise((r) => setImmediate(r));
};

/** A Sungrow-like battery as a register map that can refuse writes (exception 3, illegal data value). */
class HybridTransport implements Transport {
  isOpen = true;
  regs = new Map<number, number>([
    [POWER, 0],
    [1, 50],
    [MODE, 0],
    [CMD, 0xcc],
    [SET, 0],
  ]);
  /** The highest forced power it takes; above it the power write is refused (exception 3, illegal data value). */
  maxSet = Infinity;
  /** Every write refused. */
  refuseAll = false;
  writes: string[] = [];
  async open() {}
  async close() {}
  async read(_unit: number, _table: Table, address: number, count: number) {
    return Array.from({ length: count }, (_, i) => this.regs.get(address + i) ?? 0);
  }
  async writeRegisters(_unit: number, address: number, values: number[]) {
    if (this.refuseAll || (address === SET && (values[0] ?? 0) > this.maxSet)) {
      this.writes.push(`refused ${address}`);
      throw Object.assign(new Error("Modbus exception 3: Illegal data value"), { modbusCode: 3 });
    }
    this.writes.push(`write ${address}=${values.join(",")}`);
    values.forEach((v, i) => this.regs.set(address + i, v));
  }
  async writeCoils() {
    throw new Error("no coils");
  }
  state() {
    return { mode: this.regs.get(MODE), cmd: this.regs.get(CMD), set: this.regs.get(SET) };
  }
}

const UNDISTURBED = { mode: 0, cmd: 0xcc, set: 0 };

const profile = fixedProfileSchema.parse({
  name: "test-hybrid",
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
      { address: CMD, value: 0xbb },
      { address: SET, value: "$watts", range: [0, 5000] },
    ],
  },
});

async function rig() {
  const t = new HybridTransport();
  const bus = new Bus({ kind: "tcp", host: "127.0.0.1", port: 1 }, silentLogger(), t);
  const driver = new DeviceDriver(bus, 1, profile);
  await driver.pair();
  const device: RegisteredDevice = {
    config: { device_id: "sungrow" } as RegisteredDevice["config"],
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
  const source: DeviceSource & { version: number } = {
    list: () => [device],
    get: (id) => (id === "sungrow" ? device : undefined),
    version: 0,
  };
  const pool = { driverFor: () => driver } as unknown as DriverPool;
  let remote = false;
  const view = {
    health: () => ({
      online: true,
      last_ok_at: null,
      last_error: null,
      consecutive_failures: 0,
      op_mode: remote ? (2 as const) : (1 as const),
    }),
    latest: () => ({ power_w: t.regs.get(MODE) === 2 ? (t.regs.get(SET) ?? 0) : 0, soc_pct: 50 }),
    confirm: () => {},
    setRemote: (_id: string, on: boolean) => void (remote = on),
  };
  const devices = new SiteDevices([new ModbusFamily(source, pool, view)]);
  const tmp = makeTmpDir();
  const db = openDatabase(tmp.dir);
  migrate(db, [DISPATCH_MIGRATIONS]);
  const clock = new FakeClock(T0);
  const responses: ExecutionResponse[] = [];
  const d = new Dispatcher({
    db: () => db,
    devices,
    clock,
    log: silentLogger(),
    pollIntervalMs: 1000,
    respond: (_s, b) => responses.push(b),
  });
  await d.start();
  const poll = async (until: number) => {
    while (clock.now() < until) {
      clock.advance(1000);
      d.observe({ ts: clock.now(), devices: devices.list().map((x) => ({ device_id: x.id, metrics: x.latest() })) });
      await settle();
    }
  };
  const ledger = () =>
    db.prepare("SELECT * FROM dp_ledger WHERE device_id = 'sungrow'").get() as { unreleased?: string | null } | undefined;
  return {
    t,
    d,
    clock,
    poll,
    ledger,
    responses,
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

test("finding 4: the power write refused after the mode and command writes: those two are put back in the same tick; the device is listed with the refusal", async () => {
  const r = await rig();
  try {
    r.t.maxSet = 2000;
    const ev = discharge(2.5);
    r.d.submit(ev);
    r.clock.advance(10_000); // the event starts; no poll in between
    await settle();
    assert.deepEqual(r.t.writes.slice(0, 5), ["write 100=2", "write 101=187", "refused 102", "write 101=204", "write 100=0"]);
    assert.deepEqual(r.t.state(), UNDISTURBED, "not left forced idle at 0 W");
    await r.poll(T0 + 71_000);
    assert.deepEqual(r.t.state(), UNDISTURBED);
    assert.equal(r.ledger(), undefined, "nothing left to release");
    const res = r.responses.find((x) => x.event_id === ev.event_slots[0].event_id)!;
    const dev = (res.details.devices as Array<{ device_id: string; status: string; error?: string }>)[0];
    assert.equal(dev?.status, "failed", JSON.stringify(res));
    assert.match(
      dev?.error ?? "",
      /step 3 of 3 \(holding 102\) refused after 2 step\(s\) were written: .*exception 3.*; the steps written were put back/,
    );
  } finally {
    await r.close();
  }
});

test("finding 4: a rollback the device refuses too becomes an unreleased row, retried until the device reads its pre-state back", async () => {
  const r = await rig();
  try {
    r.t.maxSet = 2000;
    r.d.submit(discharge(2.5));
    // The power refusal turns into a refusal of everything: the rollback is refused too.
    let stuck = true;
    const write = r.t.writeRegisters.bind(r.t);
    r.t.writeRegisters = async (unit, address, values) => {
      try {
        await write(unit, address, values);
      } catch (e) {
        r.t.refuseAll ||= stuck;
        throw e;
      }
    };
    r.clock.advance(10_000);
    await settle();
    assert.deepEqual(r.t.state(), { mode: 2, cmd: 0xbb, set: 0 }, "the device holds what it took");
    assert.match(r.ledger()?.unreleased ?? "", /putting back the steps written was refused too/);
    assert.deepEqual(
      r.d.health().warnings.map((w) => w.code),
      ["device_unreleased"],
    );
    await r.poll(T0 + 20_000);
    assert.deepEqual(r.t.state(), { mode: 2, cmd: 0xbb, set: 0 }, "retried, still refused; not written again");
    stuck = r.t.refuseAll = false; // the power write is still refused, but a rollback now goes through
    await r.poll(T0 + 20_000 + 60_000 + 2000);
    assert.deepEqual(r.t.state(), UNDISTURBED, "released once the device takes writes again");
    assert.equal(r.ledger(), undefined);
    assert.deepEqual(r.d.health().warnings, []);
  } finally {
    await r.close();
  }
});
