// Issue 42 item 1: points are optional unless the role needs them. A point that answers
// exception 2, or stays silent while the device's other points answer, is unavailable for
// that device: left out of the polls, probed again after an hour (an injected clock), and
// listed; the device stays online. A required point that is missing refuses the pairing by
// name. Pure logic over a fake bus holding the Sungrow SH's registers; no socket is opened.
import { test } from "node:test";
import assert from "node:assert/strict";
import { isSitegateError } from "../../src/errors.js";
import type { Bus } from "../../src/modbus/bus.js";
import { DeviceDriver } from "../../src/modbus/device/driver.js";
import { PROBE_INTERVAL_MS } from "../../src/modbus/device/unavailable.js";
import { mapModbusError } from "../../src/modbus/transport.js";
import { SitegateError } from "../../src/errors.js";
import { builtinProfiles } from "../../src/profiles/registry.js";
import { fixedProfileSchema } from "../../src/profiles/schema.js";
import { FakeClock } from "../support/fake-clock.js";

type Key = `${string}/${number}`;

/** A device of these registers: an absent one answers exception 2, a silent one times out. */
class FakeDevice {
  readonly regs = new Map<Key, number>();
  readonly silent = new Set<Key>();
  readonly requests: string[] = [];
  /** Set: every request after this many (counted in `requests`) goes unanswered. */
  quietAfter: number | null = null;

  bus(): Bus {
    return {
      endpoint: { kind: "tcp", host: "127.0.0.1", port: 1 },
      setDeviceDelay() {},
      read: async (_unit: number, table: string, address: number, count: number) => {
        this.requests.push(`${table}/${address}+${count}`);
        if (this.quietAfter !== null && this.requests.length > this.quietAfter)
          throw new SitegateError("MODBUS_TIMEOUT", `read ${table} ${address}: no answer (timeout)`, { transient: true });
        const out: number[] = [];
        for (let a = address; a < address + count; a++) {
          const k: Key = `${table}/${a}`;
          if (this.silent.has(k))
            throw new SitegateError("MODBUS_TIMEOUT", `read ${table} ${address}: no answer (timeout)`, { transient: true });
          const w = this.regs.get(k);
          if (w === undefined) throw mapModbusError({ modbusCode: 2, message: "Illegal data address" }, `read ${table} ${address}`);
          out.push(w);
        }
        return out;
      },
    } as unknown as Bus;
  }

  set(table: string, address: number, words: number[]): void {
    words.forEach((w, i) => this.regs.set(`${table}/${address + i}`, w));
  }

  asked(table: string, address: number): boolean {
    return this.requests.some((r) => {
      const [t, rest] = r.split("/") as [string, string];
      const [a, n] = rest.split("+").map(Number) as [number, number];
      return t === table && address >= a && address < a + n;
    });
  }
}

/** A Sungrow SH-RT 10 kW: every register its profile reads, the battery limits only when `limits`. */
function sungrow(limits: boolean): FakeDevice {
  const d = new FakeDevice();
  d.set(
    "input",
    4989,
    Array.from({ length: 10 }, () => 0x4130),
  ); // serial "A0A0..."
  d.set("input", 4999, [0x0e03]);
  d.set("input", 5000, [100]); // 10 kW in 0.1 kW
  for (let a = 13000; a <= 13050; a++) d.set("input", a, [0]);
  d.set("input", 13021, [1500]); // battery power, W (magnitude)
  d.set("input", 13022, [555]); // SOC 55.5 %
  d.set("holding", 13049, [0]);
  if (limits) d.set("holding", 33046, [500, 450]); // 5.0 / 4.5 kW in 0.01 kW
  return d;
}

const profile = () => builtinProfiles().get("sungrow-sh");

test("a Sungrow without 33046/33047 pairs, reads what answers, and lists the limits as unavailable (exception 2)", async () => {
  const clock = new FakeClock(Date.UTC(2026, 0, 1));
  const dev = sungrow(false);
  const driver = new DeviceDriver(dev.bus(), 1, profile(), undefined, () => clock.now());
  await driver.pair();
  const m = await driver.read(["fast", "slow"]);
  assert.equal(m.power_w, 1500);
  assert.equal(m.soc_pct, 55.5);
  assert.ok(!("max_charge_power_w" in m) && !("max_discharge_power_w" in m), JSON.stringify(m));
  assert.deepEqual(
    driver.unavailable.list().map((u) => [u.metric, u.reason]),
    [
      ["max_charge_power_w", "illegal address"],
      ["max_discharge_power_w", "illegal address"],
    ],
  );
});

test("an unavailable point is left out of the polls and probed again after an hour; once it answers it is read", async () => {
  const clock = new FakeClock(Date.UTC(2026, 0, 1));
  const dev = sungrow(false);
  const driver = new DeviceDriver(dev.bus(), 1, profile(), undefined, () => clock.now());
  await driver.pair();
  await driver.read(["fast", "slow"]);
  dev.requests.length = 0;
  clock.advance(PROBE_INTERVAL_MS - 1);
  const m = await driver.read(["fast", "slow"]);
  assert.equal(m.soc_pct, 55.5);
  assert.ok(!dev.asked("holding", 33046), `not probed before the hour: ${dev.requests.join(" ")}`);
  clock.advance(1);
  await driver.read(["fast", "slow"]);
  assert.ok(dev.asked("holding", 33046), `probed at the hour: ${dev.requests.join(" ")}`);
  assert.equal(driver.unavailable.list().length, 2, "still missing: still unavailable");
  // The firmware is updated: the next probe finds them.
  dev.set("holding", 33046, [500, 450]);
  clock.advance(PROBE_INTERVAL_MS);
  const after = await driver.read(["fast", "slow"]);
  assert.equal(after.max_charge_power_w, 5000);
  assert.equal(after.max_discharge_power_w, 4500);
  assert.deepEqual(driver.unavailable.list(), []);
});

test("with its limits present, nothing is unavailable", async () => {
  const driver = new DeviceDriver(sungrow(true).bus(), 1, profile());
  await driver.pair();
  const m = await driver.read(["fast", "slow"]);
  assert.equal(m.max_charge_power_w, 5000);
  assert.deepEqual(driver.unavailable.list(), []);
});

test("a point silent while the device's other points answer is unavailable (no answer); the device stays readable", async () => {
  const dev = sungrow(true);
  dev.silent.add("holding/33046");
  const driver = new DeviceDriver(dev.bus(), 1, profile());
  await driver.pair();
  const m = await driver.read(["fast", "slow"]);
  assert.equal(m.power_w, 1500);
  assert.equal(m.max_discharge_power_w, 4500, "its neighbour in the block still answers, read on its own");
  assert.deepEqual(
    driver.unavailable.list().map((u) => [u.metric, u.reason]),
    [["max_charge_power_w", "no answer"]],
  );
});

test("a required point that answers exception 2 refuses the pairing by its name", async () => {
  const dev = sungrow(true);
  dev.regs.delete("input/13022"); // SOC
  const driver = new DeviceDriver(dev.bus(), 1, profile());
  await assert.rejects(
    driver.pair(),
    (e: unknown) => isSitegateError(e, "PAIRING_FAILED") && /lacks soc_pct, which profile sungrow-sh requires/.test((e as Error).message),
  );
  assert.equal(driver.paired, false);
});

test("a required point that goes missing after pairing fails the read: the device is not online without it", async () => {
  const dev = sungrow(true);
  const driver = new DeviceDriver(dev.bus(), 1, profile());
  await driver.pair();
  dev.regs.delete("input/13021"); // battery power
  await assert.rejects(driver.read(["fast", "slow"]), (e: unknown) => isSitegateError(e, "MODBUS_EXCEPTION"));
  assert.deepEqual(driver.unavailable.list(), [], "the optional points are not marked for a read that failed");
});

test("a device that answers exception 2 to every block is the device's fault, not a list of missing points", async () => {
  const dev = sungrow(true);
  const driver = new DeviceDriver(dev.bus(), 1, profile());
  await driver.pair();
  dev.regs.clear();
  await assert.rejects(driver.read(["fast", "slow"]), (e: unknown) => isSitegateError(e, "MODBUS_EXCEPTION"));
  assert.deepEqual(driver.unavailable.list(), []);
});

test("a device silent from its first block is offline after one timeout, not one per block", async () => {
  const dev = sungrow(true);
  const driver = new DeviceDriver(dev.bus(), 1, profile());
  await driver.pair();
  for (const k of dev.regs.keys()) dev.silent.add(k);
  dev.requests.length = 0;
  await assert.rejects(driver.read(["fast", "slow"]), (e: unknown) => isSitegateError(e, "MODBUS_TIMEOUT"));
  assert.equal(dev.requests.length, 1, dev.requests.join(" "));
});

test("a device that goes quiet after its first block answered is offline: its other points are not marked, nor read one by one", async () => {
  const dev = sungrow(true);
  const driver = new DeviceDriver(dev.bus(), 1, profile());
  await driver.pair();
  const blocks = driver.plan(["fast", "slow"]).blocks.length;
  assert.ok(blocks > 2, `${blocks} blocks`);
  dev.requests.length = 0;
  dev.quietAfter = 1;
  await assert.rejects(driver.read(["fast", "slow"]), (e: unknown) => isSitegateError(e, "MODBUS_TIMEOUT"));
  assert.deepEqual(driver.unavailable.list(), []);
  assert.equal(dev.requests.length, blocks + 1, `each block once, and one read to tell the device went quiet: ${dev.requests.join(" ")}`);
});

test("a profile's relocate group names its own optional points: an unknown or a required one is refused", () => {
  const base = profile();
  assert.equal(base.kind, "fixed");
  const marker = { table: "holding" as const, address: 40188, values: [203] };
  const unknown = fixedProfileSchema.safeParse({ ...base, relocate: [{ points: ["no_such_w"], marker, shifts: [0, 50] }] });
  assert.ok(!unknown.success && /names no point of the profile \(no_such_w\)/.test(unknown.error.message), String(unknown.error));
  const required = fixedProfileSchema.safeParse({ ...base, relocate: [{ points: ["soc_pct"], marker, shifts: [0] }] });
  assert.ok(!required.success && /soc_pct is required/.test(required.error.message), String(required.error));
  assert.ok(fixedProfileSchema.safeParse({ ...base, relocate: [{ points: ["grid_power_w"], marker, shifts: [0] }] }).success);
});

test("a silent first planned block of optional points leaves the device online: its point is unavailable (no answer) and probed again hourly", async () => {
  const clock = new FakeClock(Date.UTC(2026, 0, 1));
  const dev = sungrow(true);
  dev.silent.add("holding/13049"); // EMS mode: the plan's first block, no required point in it
  const driver = new DeviceDriver(dev.bus(), 1, profile(), undefined, () => clock.now());
  await driver.pair();
  const first = driver.plan(["fast", "slow"]).blocks[0]!;
  assert.equal(`${first.table}/${first.address}`, "holding/13049", "the silent block is the plan's first");
  const m = await driver.read(["fast", "slow"]);
  assert.equal(m.power_w, 1500);
  assert.equal(m.soc_pct, 55.5);
  assert.equal(m.max_charge_power_w, 5000);
  assert.deepEqual(
    driver.unavailable.list().map((u) => [u.metric, u.reason]),
    [["ems_mode", "no answer"]],
  );
  dev.requests.length = 0;
  clock.advance(PROBE_INTERVAL_MS - 1);
  assert.equal((await driver.read(["fast", "slow"])).soc_pct, 55.5);
  assert.ok(!dev.asked("holding", 13049), `not probed before the hour: ${dev.requests.join(" ")}`);
  clock.advance(1);
  await driver.read(["fast", "slow"]);
  assert.ok(dev.asked("holding", 13049), `probed at the hour: ${dev.requests.join(" ")}`);
  assert.deepEqual(
    driver.unavailable.list().map((u) => u.metric),
    ["ems_mode"],
  );
  dev.silent.delete("holding/13049");
  dev.set("holding", 13049, [2]);
  clock.advance(PROBE_INTERVAL_MS);
  assert.equal((await driver.read(["fast", "slow"])).ems_mode, 2, "answers again: read again");
  assert.deepEqual(driver.unavailable.list(), []);
});

test("a device silent everywhere is offline after the one timeout of a block that holds a required point, wherever the plan puts it", async () => {
  const dev = sungrow(true);
  const driver = new DeviceDriver(dev.bus(), 1, profile());
  await driver.pair();
  for (const k of dev.regs.keys()) dev.silent.add(k);
  dev.requests.length = 0;
  await assert.rejects(driver.read(["fast", "slow"]), (e: unknown) => isSitegateError(e, "MODBUS_TIMEOUT"));
  assert.deepEqual(dev.requests, ["input/13000+47"], "the block of power_w and soc_pct, once");
  assert.deepEqual(driver.unavailable.list(), []);
});

test("without any required point, a silent first block is tried against the next one: that answers, so only the first's points are unavailable", async () => {
  const base = profile();
  assert.equal(base.kind, "fixed");
  const loose = { ...base, role: "unknown" as const, points: base.points.map((pt) => ({ ...pt, required: false })) };
  const dev = sungrow(true);
  dev.silent.add("holding/13049");
  const driver = new DeviceDriver(dev.bus(), 1, loose);
  await driver.pair();
  const m = await driver.read(["fast", "slow"]);
  assert.equal(m.soc_pct, 55.5);
  assert.deepEqual(
    driver.unavailable.list().map((u) => u.metric),
    ["ems_mode"],
  );
  // Silent everywhere: offline after two blocks, not one timeout per block.
  for (const k of dev.regs.keys()) dev.silent.add(k);
  dev.requests.length = 0;
  await assert.rejects(driver.read(["fast", "slow"]), (e: unknown) => isSitegateError(e, "MODBUS_TIMEOUT"));
  assert.equal(dev.requests.length, 2, dev.requests.join(" "));
});
