// Deye coverage, each against the simulator's Deye model (an independent reading of the
// public definitions): the device types of ha-solarman's device table, each paired by the
// profile of its units (5: deye-hybrid; 6, 0x0600, 0x0601: deye-hybrid-hv); the rated power
// at 20-21 (0.1 W, low word first) as max power; the HV models' units (battery power and
// program power in 10 W, battery voltage in 0.1 V), so that a 3 kW request is 3 kW on the
// device. Pure logic: the profile's driver talks to the model through its PDU handler; no
// socket is opened.
import { test } from "node:test";
import assert from "node:assert/strict";
import { SiteModel } from "../../hw-sim/site-model.js";
import { deviceSchema, type BrandSpec } from "../../hw-sim/scenario.js";
import { buildBrandDevices } from "../../hw-sim/models/brands/index.js";
import type { DeyeHybrid } from "../../hw-sim/models/brands/deye-hybrid.js";
import { handlePdu } from "../../hw-sim/modbus-pdu.js";
import type { Bus } from "../../src/modbus/bus.js";
import { DeviceDriver } from "../../src/modbus/device/driver.js";
import { planControlWrites } from "../../src/modbus/device/control-values.js";
import { mapModbusError } from "../../src/modbus/transport.js";
import { builtinProfiles } from "../../src/profiles/registry.js";
import { isSitegateError } from "../../src/errors.js";

/** The model as the simulator builds it from a scenario entry, at 02:30 UTC (inside the first program). */
function deye(extra: Record<string, unknown>): DeyeHybrid {
  const site = new SiteModel(
    { base_load_w: 2000, load_noise_pct: 0, pv_irradiance: 0, tz_offset_h: 0, voltage_v: 230, frequency_hz: 50 },
    7,
    () => Date.UTC(2026, 5, 1, 2, 30),
  );
  const spec = deviceSchema.parse({
    unit: 1,
    name: "deye",
    model: "deye-hybrid",
    variant: "three-phase",
    capacity_wh: 10240,
    soc_pct: 50,
    max_power_w: 8000,
    ...extra,
  }) as BrandSpec;
  return buildBrandDevices(spec, site)[0] as DeyeHybrid;
}

function exchange(dev: DeyeHybrid, pdu: Buffer, what: string): Buffer {
  const r = handlePdu(dev, pdu, () => {});
  if (r[0]! & 0x80) throw mapModbusError({ modbusCode: r[1], message: `exception ${r[1]}` }, what);
  return r;
}

/** A bus the model answers (function 3; 16 for writes); an exception is thrown as the transport maps it. */
function busOf(dev: DeyeHybrid): Bus {
  return {
    endpoint: { kind: "tcp", host: "127.0.0.1", port: 1 },
    setDeviceDelay() {},
    read: async (_unit: number, table: string, address: number, count: number) => {
      const pdu = Buffer.alloc(5);
      pdu[0] = table === "input" ? 4 : 3;
      pdu.writeUInt16BE(address, 1);
      pdu.writeUInt16BE(count, 3);
      const r = exchange(dev, pdu, `read ${table} ${address}`);
      return Array.from({ length: count }, (_, i) => r.readUInt16BE(2 + i * 2));
    },
  } as unknown as Bus;
}

function write(dev: DeyeHybrid, address: number, words: number[]): void {
  const pdu = Buffer.alloc(6 + words.length * 2);
  pdu[0] = 16;
  pdu.writeUInt16BE(address, 1);
  pdu.writeUInt16BE(words.length, 3);
  pdu[5] = words.length * 2;
  words.forEach((w, i) => pdu.writeUInt16BE(w, 6 + i * 2));
  exchange(dev, pdu, `write ${address}`);
}

const profile = (name: string) => builtinProfiles().get(name);

/** Pairs the profile with the model, plans the action's writes as the gateway does, and applies them. */
async function act(dev: DeyeHybrid, name: string, action: "charge" | "discharge", watts: number): Promise<void> {
  const p = profile(name);
  const driver = new DeviceDriver(busOf(dev), 1, p);
  await driver.pair();
  assert.ok(p.kind === "fixed");
  for (const w of await planControlWrites(driver, p.actions[action]!, { watts })) write(dev, w.address, w.words);
}

const cases: Array<[number, string, boolean]> = [
  [5, "deye-hybrid", false],
  [6, "deye-hybrid-hv", true],
  [0x0600, "deye-hybrid-hv", true],
  [0x0601, "deye-hybrid-hv", true],
];
for (const [device_type, name, hv] of cases) {
  const other = name === "deye-hybrid" ? "deye-hybrid-hv" : "deye-hybrid";
  test(`device type 0x${device_type.toString(16).padStart(4, "0")} pairs with ${name} and is refused by ${other}`, async () => {
    const d = await new DeviceDriver(busOf(deye({ device_type, hv })), 1, profile(name)).pair();
    assert.equal(d.identity.device_type, String(device_type));
    await assert.rejects(
      new DeviceDriver(busOf(deye({ device_type, hv })), 1, profile(other)).pair(),
      (e) =>
        isSitegateError(e) && /identity register device_type \(holding 0, unit 1\) reads \d+, the profile expects one of/.test(e.message),
    );
  });
}

test("max power is the rated power at 20-21 (0.1 W, low word first), LV and HV", async () => {
  for (const [name, hv] of [
    ["deye-hybrid", false],
    ["deye-hybrid-hv", true],
  ] as const) {
    for (const rated_power_w of [8000, 12000]) {
      const d = await new DeviceDriver(busOf(deye({ rated_power_w, hv })), 1, profile(name)).pair();
      assert.equal(d.max_power_w, rated_power_w, `${name} ${rated_power_w}`);
    }
  }
});

test("the single-phase map (device type 3) pairs with deye-hybrid-1p: rated power at 16-17, its 2xx registers", async () => {
  const dev = deye({ variant: "single-phase", rated_power_w: 6000 });
  const driver = new DeviceDriver(busOf(dev), 1, profile("deye-hybrid-1p"));
  const d = await driver.pair();
  assert.equal(d.identity.device_type, "3");
  assert.equal(d.max_power_w, 6000);
  const m = await driver.read(["fast", "slow"]);
  assert.equal(m.soc_pct, 50);
  assert.equal(m.battery_voltage_v, dev.batteryV());
  assert.ok(Math.abs(m.power_w! - dev.view().power_w) < 2, `power ${m.power_w} W, the model's ${dev.view().power_w} W`);
  await assert.rejects(new DeviceDriver(busOf(deye({})), 1, profile("deye-hybrid-1p")).pair(), (e) => isSitegateError(e));
});

test("deye-hybrid-1p: a 3 kW discharge and a 3 kW charge are 3 kW on the single-phase model", async () => {
  const dis = deye({ variant: "single-phase" });
  await act(dis, "deye-hybrid-1p", "discharge", 3000);
  assert.equal(dis.view().mode, "forced-discharge");
  assert.equal(dis.view().power_w, 3000);
  const chg = deye({ variant: "single-phase" });
  await act(chg, "deye-hybrid-1p", "charge", 3000);
  assert.equal(chg.view().mode, "forced-charge");
  const w = -chg.view().power_w;
  assert.ok(Math.abs(w - 3000) <= chg.batteryV(), `charge ${w} W`);
});

test("the single-phase map (device type 3) is refused by both three-phase profiles", async () => {
  for (const name of ["deye-hybrid", "deye-hybrid-hv"])
    await assert.rejects(
      new DeviceDriver(busOf(deye({ variant: "single-phase" })), 1, profile(name)).pair(),
      (e) =>
        isSitegateError(e) && /identity register device_type \(holding 0, unit 1\) reads \d+, the profile expects one of/.test(e.message),
    );
});

test("HV units: the battery power (10 W) and voltage (0.1 V) read as the model's watts and volts", async () => {
  const dev = deye({ hv: true });
  const driver = new DeviceDriver(busOf(dev), 1, profile("deye-hybrid-hv"));
  await driver.pair();
  const m = await driver.read(["fast", "slow"]);
  assert.equal(m.battery_voltage_v, dev.batteryV());
  assert.ok(m.battery_voltage_v! > 160, `an HV pack: ${m.battery_voltage_v} V`);
  assert.ok(Math.abs(m.power_w! - dev.view().power_w) < 10, `power ${m.power_w} W, the model's ${dev.view().power_w} W`);
});

for (const [name, hv] of [
  ["deye-hybrid", false],
  ["deye-hybrid-hv", true],
] as const) {
  test(`${name}: a 3 kW discharge and a 3 kW charge are 3 kW on the model`, async () => {
    const dis = deye({ hv });
    await act(dis, name, "discharge", 3000);
    assert.equal(dis.view().mode, "forced-discharge");
    assert.equal(dis.view().power_w, 3000);
    const chg = deye({ hv });
    await act(chg, name, "charge", 3000);
    assert.equal(chg.view().mode, "forced-charge");
    const w = -chg.view().power_w;
    // The grid charge current is whole amps: W / V rounded, within one amp of the request.
    assert.ok(Math.abs(w - 3000) <= chg.batteryV(), `charge ${w} W`);
  });
}

test("the LV profile refuses an HV model (whose 10 W and 0.1 V units it would misread by ten)", async () => {
  for (const device_type of [6, 0x0600, 0x0601])
    await assert.rejects(new DeviceDriver(busOf(deye({ device_type, hv: true })), 1, profile("deye-hybrid")).pair(), (e) =>
      isSitegateError(e),
    );
});

test("the model's HV units on the wire: 587 in 0.1 V, 590 and the program powers in 10 W", async () => {
  const dev = deye({ hv: true });
  const bus = busOf(dev);
  const [v] = await bus.read(1, "holding", 587, 1);
  assert.equal(v, Math.round(dev.batteryV() * 10));
  const [w] = await bus.read(1, "holding", 590, 1);
  assert.equal(w, Math.round(dev.view().power_w / 10));
  write(dev, 154, [300]);
  assert.equal(dev.programs[0]!.power, 3000);
  assert.throws(() => write(dev, 154, [801]), /exception 3/, "above the 8 kW rating");
  assert.equal((await bus.read(1, "holding", 0, 1))[0], 6, "an HV model is device type 6 unless set");
});
