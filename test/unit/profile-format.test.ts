// What real register maps need of the profile format, each against a register-level fake
// bus: a sign from a direction bit, two magnitudes subtracted, per-point "not available"
// values, rated power from a register, named constants and state names, 32-bit writes in
// either word order, a sub-device's own unit id (read, written, and put back by the
// ledger), write-only registers put back by a profile-given value, a read-back that fails
// an action that did not take, and a watchdog refresh bound.
import { test } from "node:test";
import assert from "node:assert/strict";
import { profileSchema, type Profile } from "../../src/profiles/schema.js";
import { DeviceDriver } from "../../src/modbus/device/driver.js";
import { planWrites } from "../../src/modbus/device/control-values.js";
import { ModbusFamily } from "../../src/modbus/device/family.js";
import { SiteDevices } from "../../src/devices/directory.js";
import type { RawWrite } from "../../src/modbus/device/raw-write.js";
import { Ledger } from "../../src/dispatch/ledger.js";
import { DISPATCH_MIGRATIONS } from "../../src/dispatch/store.js";
import { openDatabase, migrate } from "../../src/storage/db.js";
import { SitegateError, isSitegateError } from "../../src/errors.js";
import type { Bus } from "../../src/modbus/bus.js";
import { withTmpDir } from "../support/tmp.js";

type Table = "holding" | "input" | "coil" | "discrete";

/** Registers by unit id and table; a register nobody set answers exception 2 (illegal address). */
class RegisterBus {
  readonly endpoint = { kind: "tcp", host: "127.0.0.1", port: 1 };
  readonly regs = new Map<string, number>();
  readonly reads: Array<{ unit: number; table: Table; address: number; count: number }> = [];
  readonly writes: Array<{ unit: number; address: number; words: number[] }> = [];
  /** Registers that refuse a read (write-only), as unit/table/address. */
  readonly writeOnly = new Set<string>();
  /** Registers that ignore writes (a device that refuses a mode in its current state). */
  readonly ignoreWrites = new Set<string>();

  setDeviceDelay(): void {}

  set(unit: number, table: Table, address: number, words: number[]): this {
    words.forEach((w, i) => this.regs.set(`${unit}/${table}/${address + i}`, w));
    return this;
  }

  get(unit: number, table: Table, address: number): number | undefined {
    return this.regs.get(`${unit}/${table}/${address}`);
  }

  async read(unit: number, table: Table, address: number, count: number): Promise<number[]> {
    this.reads.push({ unit, table, address, count });
    const out: number[] = [];
    for (let i = 0; i < count; i++) {
      const key = `${unit}/${table}/${address + i}`;
      const w = this.regs.get(key);
      if (w === undefined || this.writeOnly.has(key))
        throw new SitegateError("MODBUS_EXCEPTION", `unit ${unit}: exception 2`, { details: [{ path: "code", message: "2" }] });
      out.push(w);
    }
    return out;
  }

  async writeRegisters(unit: number, address: number, words: number[]): Promise<void> {
    this.writes.push({ unit, address, words: [...words] });
    words.forEach((w, i) => {
      const key = `${unit}/holding/${address + i}`;
      if (!this.ignoreWrites.has(key)) this.regs.set(key, w);
    });
  }

  async writeCoils(): Promise<void> {}
}

/** A battery's profile: it offers charge and discharge (a device offers an action only where its capabilities name it). */
function profile(p: Record<string, unknown>): Profile {
  return profileSchema.parse({ name: "t", kind: "fixed", role: "battery", capabilities: ["telemetry", "charge", "discharge"], ...p });
}

function driverOf(bus: RegisterBus, unit: number, p: Profile): DeviceDriver {
  return new DeviceDriver(bus as unknown as Bus, unit, p);
}

test("a magnitude takes its sign from a direction bit, on the device's unit or another", async () => {
  const p = profile({
    points: [
      { metric: "power_w", table: "input", address: 100, direction: { table: "input", address: 90, bit: 1, negative: [1] } },
      { metric: "other_w", table: "input", address: 101, direction: { table: "input", address: 5, unit: 9, negative: [2] } },
    ],
  });
  // The planner reads 90..101 in one request (the gap is cheaper than a second request).
  const bus = new RegisterBus().set(1, "input", 90, Array(12).fill(0)).set(1, "input", 100, [1500, 700]);
  bus.set(1, "input", 90, [0b100]).set(9, "input", 5, [2]);
  const d = driverOf(bus, 1, p);
  await d.pair();
  assert.deepEqual(await d.read(["fast"]), { power_w: 1500, other_w: -700 }, "discharging bit: positive; unit 9 says negative");
  bus.set(1, "input", 90, [0b010]).set(9, "input", 5, [1]);
  assert.deepEqual(await d.read(["fast"]), { power_w: -1500, other_w: 700 }, "charging bit set: negative");
});

test("a point may subtract a second magnitude (charge and discharge reported apart)", async () => {
  const p = profile({
    points: [{ metric: "power_w", address: 31395, type: "u32", na: [0xffffffff], minus: { address: 31393, na: [0xffffffff] } }],
  });
  const bus = new RegisterBus().set(1, "holding", 31393, [0, 1200, 0, 0]);
  const d = driverOf(bus, 1, p);
  await d.pair();
  assert.deepEqual(await d.read(["fast"]), { power_w: -1200 }, "charging 1200 W: -1200");
  bus.set(1, "holding", 31393, [0, 0, 0, 800]);
  assert.deepEqual(await d.read(["fast"]), { power_w: 800 });
  bus.set(1, "holding", 31393, [0xffff, 0xffff]);
  assert.deepEqual(await d.read(["fast"]), {}, "the subtracted register reads NaN: no value");
});

test("per-point not-available values read as no value, in the point's word order", async () => {
  const p = profile({
    points: [
      { metric: "a", address: 0, type: "s16", na: [0x7fff, 0x8000] },
      { metric: "b", address: 1, type: "u32", word_order: "little", na: [0xfffffffe] },
      { metric: "c", address: 3, type: "u16" },
    ],
  });
  const bus = new RegisterBus().set(1, "holding", 0, [0x7fff, 0xfffe, 0xffff, 0xffff]);
  const d = driverOf(bus, 1, p);
  await d.pair();
  assert.deepEqual(await d.read(["fast"]), { c: 0xffff }, "0x7FFF and 0xFFFFFFFE (low word first) are not values; c lists none");
  bus.set(1, "holding", 0, [0xfffe, 0xffff, 0xfffe]);
  assert.deepEqual(await d.read(["fast"]), { a: -2, b: 0xfffeffff, c: 0xffff });
});

test("a profile's not-available values per data type apply to every point of that type, the enum one to enum points, all_ones to 64 bits", async () => {
  const p = profile({
    not_available: { s32: [0x80000000], u64: ["all_ones"], enum: [0xfffffd] },
    enums: { state: { ok: 307 } },
    points: [
      { metric: "a", address: 0, type: "s32" },
      { metric: "b", address: 2, type: "u64" },
      { metric: "c", address: 6, type: "u32", enum: "state" },
      { metric: "d", address: 8, type: "u32" },
    ],
  });
  const bus = new RegisterBus().set(1, "holding", 0, [0x8000, 0, 0xffff, 0xffff, 0xffff, 0xffff, 0x00ff, 0xfffd, 0x00ff, 0xfffd]);
  const d = driverOf(bus, 1, p);
  await d.pair();
  assert.deepEqual(await d.read(["fast"]), { d: 0xfffffd }, "NaN by type; 0xFFFFFD only where the point names an enum");
  bus.set(1, "holding", 0, [0xffff, 0xfffe, 0, 0, 0, 5, 0, 307]);
  assert.deepEqual(await d.read(["fast"]), { a: -2, b: 5, c: 307, d: 0xfffffd });
});

test("a write step's `when` is for the devices whose identity read one of its values; it must name an identity register", async () => {
  const p = profile({
    identity: [{ name: "class", address: 10 }],
    points: [{ metric: "x", address: 0 }],
    actions: {
      charge: [
        { when: { identity: "class", values: [1] }, address: 100, value: 1 },
        { when: { identity: "class", values: [2] }, address: 200, value: 2 },
      ],
    },
  });
  for (const cls of [1, 2]) {
    const d = driverOf(new RegisterBus().set(1, "holding", 0, [0]).set(1, "holding", 10, [cls]), 1, p);
    await d.pair();
    assert.deepEqual(
      planWrites(d, p.actions.charge!, {}).map((w) => w.address),
      [cls * 100],
    );
  }
  const bad = profileSchema.safeParse({
    name: "t",
    kind: "fixed",
    role: "battery",
    points: [{ metric: "x", address: 0 }],
    actions: { charge: [{ when: { identity: "class", values: [1] }, address: 1, value: 1 }] },
  });
  assert.equal(bad.success, false);
  assert.deepEqual(
    bad.error!.issues.map((i) => i.path.join(".")),
    ["actions.charge.0.when.identity"],
  );
});

test("rated power comes from a register; a not-available reading falls back to max_power_w", async () => {
  const p = profile({ max_power_w: 3000, max_power: { table: "input", address: 5000, scale: 100 }, points: [{ metric: "x", address: 0 }] });
  const bus = new RegisterBus().set(1, "holding", 0, [1]).set(1, "input", 5000, [80]);
  assert.equal((await driverOf(bus, 1, p).pair()).max_power_w, 8000, "80 x 0.1 kW");
  bus.set(1, "input", 5000, [0]);
  assert.equal((await driverOf(bus, 1, p).pair()).max_power_w, 3000, "0 is no rating: the profile's figure");
});

test("named constants write their value, name a point's states, and must exist", async () => {
  const p = profile({
    enums: { ems_mode: { self_consumption: 0, forced: 2 }, command: { charge: 0xaa } },
    points: [{ metric: "ems_mode", address: 13049, enum: "ems_mode" }],
    actions: {
      charge: [
        { address: 13049, value: "ems_mode.forced" },
        { address: 13050, value: "command.charge" },
      ],
    },
  });
  const bus = new RegisterBus().set(1, "holding", 13049, [2]);
  const d = driverOf(bus, 1, p);
  await d.pair();
  const writes = planWrites(d, p.actions.charge!, {});
  assert.deepEqual(
    writes.map((w) => [w.address, w.words]),
    [
      [13049, [2]],
      [13050, [0xaa]],
    ],
  );
  assert.equal(d.label("ems_mode", 2), "forced");
  assert.equal(d.label("ems_mode", 7), undefined);
  const bad = profileSchema.safeParse({
    name: "t",
    kind: "fixed",
    role: "battery",
    enums: { ems_mode: { forced: 2 } },
    points: [{ metric: "s", address: 0, enum: "mode" }],
    actions: { charge: [{ address: 1, value: "ems_mode.charge" }] },
  });
  assert.equal(bad.success, false);
  const paths = bad.error!.issues.map((i) => i.path.join("."));
  assert.ok(paths.includes("actions.charge.0.value") && paths.includes("points.0.enum"), paths.join(" "));
});

test("32-bit writes go out in the step's word order, after its scale", async () => {
  const p = profile({
    max_power_w: 5000,
    points: [{ metric: "x", address: 0 }],
    actions: {
      discharge: [
        { address: 10, type: "s32", value: "$watts", scale: -1 },
        { address: 12, type: "s32", word_order: "little", value: "$watts", scale: -1 },
        { address: 14, type: "f32", word_order: "little", value: "$watts" },
        { address: 16, type: "u16", value: "$watts", scale: 0.1 },
      ],
    },
  });
  const d = driverOf(new RegisterBus().set(1, "holding", 0, [0]), 1, p);
  await d.pair();
  const w = planWrites(d, p.actions.discharge!, { watts: 1000 });
  assert.deepEqual(
    w.map((x) => x.words),
    [[0xffff, 0xfc18], [0xfc18, 0xffff], [0x0000, 0x447a], [100]],
  );
});

test("a sub-device's unit id: read, written, put back by the ledger from that unit", async () => {
  await withTmpDir(async (dir) => {
    const p = profile({
      max_power_w: 5000,
      sub_units: [100], // the writes go to the GX's system unit, which the profile declares
      points: [
        { metric: "power_w", address: 842, unit: 100, type: "s16", scale: -1 },
        { metric: "state", address: 31 },
      ],
      actions: { charge: [{ unit: 100, address: 2700, type: "s16", value: "$watts" }], release: [{ unit: 100, address: 2700, value: 0 }] },
    });
    const bus = new RegisterBus().set(227, "holding", 31, [9]).set(100, "holding", 842, [0xfe0c]).set(100, "holding", 2700, [50]);
    const d = driverOf(bus, 227, p);
    await d.pair();
    assert.deepEqual(await d.read(["fast"]), { power_w: 500, state: 9 });
    assert.deepEqual(
      [...new Set(bus.reads.map((r) => r.unit))].sort((a, b) => a - b),
      [100, 227],
    );
    const { control, db } = controlFor(dir, d);
    const ledger = new Ledger(db, control);
    await ledger.hold("bat", ["e1"], { action: "charge", watts: 1500 }, 1);
    assert.deepEqual(bus.writes.at(-1), { unit: 100, address: 2700, words: [1500] });
    assert.deepEqual(ledger.get("bat")!.pre, [{ table: "holding", address: 2700, unit: 100, words: [50], coils: [] }]);
    assert.equal(bus.get(227, "holding", 2700), undefined, "nothing written on the VE.Bus unit");
    const out = await ledger.release("bat");
    assert.deepEqual(out, { verified: true });
    assert.equal(bus.get(100, "holding", 2700), 50, "pre-event setpoint put back on unit 100");
    db.close();
  });
});

function controlFor(dir: string, d: DeviceDriver): { control: SiteDevices; db: ReturnType<typeof openDatabase> } {
  const db = openDatabase(dir);
  migrate(db, [DISPATCH_MIGRATIONS]);
  const config = { device_id: "bat" } as never;
  const row = { config, descriptor: d.descriptor, fully_configured: true, updated_at: "" };
  const source = { list: () => [row], get: () => row, version: 0 };
  const telemetry = { health: () => undefined, latest: () => undefined, confirm() {}, setRemote() {} };
  return { control: new SiteDevices([new ModbusFamily(source, { driverFor: () => d } as never, telemetry)]), db };
}

test("a write-only register is put back with the profile's value, never read", async () => {
  await withTmpDir(async (dir) => {
    const p = profile({
      max_power_w: 4000,
      enums: { bms: { charge: 2289, default: 2424 } },
      points: [{ metric: "x", address: 0 }],
      actions: {
        charge: [
          { address: 40236, type: "u32", value: "bms.charge", restore: "bms.default" },
          { address: 40795, type: "u32", value: "$watts", restore: "$max_power_w" },
        ],
      },
    });
    const bus = new RegisterBus().set(1, "holding", 0, [0]).set(1, "holding", 40236, [0, 1]).set(1, "holding", 40795, [0, 1]);
    bus.writeOnly.add("1/holding/40236").add("1/holding/40237").add("1/holding/40795").add("1/holding/40796");
    const d = driverOf(bus, 1, p);
    await d.pair();
    const { control, db } = controlFor(dir, d);
    const ledger = new Ledger(db, control);
    await ledger.hold("bat", ["e1"], { action: "charge", watts: 3000 }, 1);
    assert.ok(!bus.reads.some((r) => r.address >= 40000), "no read of a write-only register");
    assert.deepEqual(
      (ledger.get("bat")!.pre as RawWrite[]).map((w) => [w.address, w.words]),
      [
        [40236, [0, 2424]],
        [40795, [0, 4000]],
      ],
    );
    assert.deepEqual(await ledger.release("bat"), { verified: true }, "write-only registers are not read back");
    assert.deepEqual(
      bus.writes.slice(-2).map((w) => [w.address, w.words]),
      [
        [40795, [0, 4000]],
        [40236, [0, 2424]],
      ],
    );
    db.close();
  });
});

test("a read-back that does not hold its value fails the action with the register and both values", async () => {
  await withTmpDir(async (dir) => {
    const p = profile({
      max_power_w: 5000,
      enums: { ems_mode: { self_consumption: 0, forced: 2 } },
      points: [{ metric: "x", address: 0 }],
      actions: { charge: [{ address: 13049, value: "ems_mode.forced" }] },
      readback: { charge: [{ address: 13049, expect: "ems_mode.forced" }] },
    });
    const bus = new RegisterBus().set(1, "holding", 0, [0]).set(1, "holding", 13049, [0]);
    const d = driverOf(bus, 1, p);
    await d.pair();
    const { control, db } = controlFor(dir, d);
    const ledger = new Ledger(db, control);
    bus.ignoreWrites.add("1/holding/13049");
    await assert.rejects(ledger.hold("bat", ["e1"], { action: "charge" }, 1), (e: unknown) => {
      assert.ok(isSitegateError(e, "CONTROL_NOT_CONFIRMED"));
      assert.match(
        (e as Error).message,
        /charge did not take effect: holding register 13049 of unit 1 reads 0, expected 2 \(ems_mode\.forced\)/,
      );
      return true;
    });
    bus.ignoreWrites.clear();
    await ledger.hold("bat", ["e1"], { action: "charge" }, 2);
    assert.equal(bus.get(1, "holding", 13049), 2);
    db.close();
  });
});

test("a watchdog: refresh_s must be set and below revert_s; dispatch rewrites at refresh_s", async () => {
  const base = { name: "t", kind: "fixed", role: "battery", points: [{ metric: "x", address: 0 }] };
  for (const refresh_s of [0, 300, 400]) {
    const r = profileSchema.safeParse({ ...base, revert_s: 300, refresh_s });
    assert.equal(r.success, false, `refresh ${refresh_s}`);
    assert.deepEqual(r.error!.issues[0].path, ["refresh_s"]);
  }
  const p = profile({
    revert_s: 300,
    refresh_s: 120,
    points: [{ metric: "x", address: 0 }],
    actions: { charge: [{ address: 10, value: "$watts" }] },
  });
  const d = driverOf(new RegisterBus().set(1, "holding", 0, [0]), 1, p);
  await d.pair();
  await withTmpDir((dir) => {
    const { control, db } = controlFor(dir, d);
    assert.equal(control.get("bat")!.power!.refreshMs, 120_000, "the executor's setpoint rewrite period (as for SunSpec RvrtTms)");
    db.close();
  });
});

test("a write-only register whose restore value is unknown is refused before anything is written", async () => {
  const p = profile({
    points: [{ metric: "x", address: 0 }],
    actions: { charge: [{ address: 40795, type: "u32", value: 100, restore: "$max_power_w" }] },
  });
  const d = driverOf(new RegisterBus().set(1, "holding", 0, [0]), 1, p);
  await d.pair();
  assert.throws(
    () => planWrites(d, p.actions.charge!, {}),
    (e: unknown) =>
      isSitegateError(e, "CONTROL_VALUE_INVALID") && /did not report its rated power; nothing written/.test((e as Error).message),
  );
});
