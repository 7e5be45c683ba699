// The brand device models of the simulator against their manufacturers' documents, on a
// controlled clock: identity, the battery power's sign in each brand's own encoding,
// forced charge and discharge, release to the device's own self-consumption, refusal of
// out-of-range values (exception 3), undocumented addresses (exception 2), and the
// revert of a forced mode where the document has one.
import { test } from "node:test";
import assert from "node:assert/strict";
import { SiteModel } from "../../hw-sim/site-model.js";
import { deviceSchema, type BrandSpec } from "../../hw-sim/scenario.js";
import { BRANDS, brandRow, buildBrandDevices } from "../../hw-sim/models/brands/index.js";
import { brandPlacements } from "../../hw-sim/models/brands/site.js";
import { builtinProfiles } from "../../src/profiles/registry.js";
import { handlePdu } from "../../hw-sim/modbus-pdu.js";
import { dec } from "../../hw-sim/models/brands/register-map.js";
import type { SimDevice } from "../../hw-sim/models/device.js";
import type { HybridInverter } from "../../hw-sim/models/brands/hybrid.js";
import { UnknownDevice } from "../../hw-sim/models/unknown.js";

/** 02:30 UTC: inside the Deye's default first program (01:00..05:00). */
const START = Date.UTC(2026, 5, 1, 2, 30);

function rig(model: string, extra: Record<string, unknown> = {}, clock: { timezone?: string; at?: number } = {}) {
  let now = clock.at ?? START;
  const site = new SiteModel(
    { base_load_w: 2000, load_noise_pct: 0, pv_irradiance: 0, tz_offset_h: 0, voltage_v: 230, frequency_hz: 50, timezone: clock.timezone },
    7,
    () => now,
  );
  const meter = brandRow(model).kind === "meter";
  const spec = deviceSchema.parse({ unit: 1, name: "dev", model, ...(meter ? {} : { capacity_wh: 100000 }), ...extra }) as BrandSpec;
  const devs = buildBrandDevices(spec, site);
  return {
    site,
    devs,
    dev: devs[0],
    bat: devs[0] as HybridInverter,
    advance: (ms: number) => {
      now += ms;
      site.advance();
    },
  };
}

class Exc extends Error {
  constructor(readonly code: number) {
    super(`exception ${code}`);
  }
}

function read(dev: SimDevice, fn: 3 | 4, address: number, count: number): number[] {
  const pdu = Buffer.alloc(5);
  pdu[0] = fn;
  pdu.writeUInt16BE(address, 1);
  pdu.writeUInt16BE(count, 3);
  const r = handlePdu(dev, pdu, () => {});
  if (r[0] & 0x80) throw new Exc(r[1]);
  return Array.from({ length: count }, (_, i) => r.readUInt16BE(2 + i * 2));
}

/** Writes with function 6 for one register, 16 for more; returns the exception code or 0. */
function write(dev: SimDevice, address: number, values: number[]): number {
  let pdu: Buffer;
  if (values.length === 1) {
    pdu = Buffer.alloc(5);
    pdu[0] = 6;
    pdu.writeUInt16BE(address, 1);
    pdu.writeUInt16BE(values[0] & 0xffff, 3);
  } else {
    pdu = Buffer.alloc(6 + values.length * 2);
    pdu[0] = 16;
    pdu.writeUInt16BE(address, 1);
    pdu.writeUInt16BE(values.length, 3);
    pdu[5] = values.length * 2;
    values.forEach((v, i) => pdu.writeUInt16BE(v & 0xffff, 6 + i * 2));
  }
  const r = handlePdu(dev, pdu, () => {});
  return r[0] & 0x80 ? r[1] : 0;
}

const ok = (dev: SimDevice, address: number, values: number[]) => assert.equal(write(dev, address, values), 0, `write ${address}`);
const code = (f: () => unknown) => {
  try {
    f();
  } catch (e) {
    if (e instanceof Exc) return e.code;
    throw e;
  }
  return 0;
};
const str = (words: number[]) =>
  Buffer.from(words.flatMap((w) => [w >> 8, w & 0xff]))
    .toString("latin1")
    .replace(/\0+$/, "");
const u32hi = (w: number) => [(w >>> 16) & 0xffff, w & 0xffff];
const u32lo = (w: number) => [w & 0xffff, (w >>> 16) & 0xffff];
const s32hi = (w: number) => u32hi(w >>> 0);
const f32lo = (v: number) => {
  const b = Buffer.alloc(4);
  b.writeFloatBE(v, 0);
  return [b.readUInt16BE(2), b.readUInt16BE(0)];
};

test("sungrow-sh: identity, magnitude plus direction bits, forced charge/discharge, release, refusal", () => {
  const { dev, bat, advance } = rig("sungrow-sh", { rated_power_w: 10000 });
  assert.equal(read(dev, 4, 4999, 1)[0], 0x0e03, "device type code SH10RT");
  assert.equal(read(dev, 4, 5000, 1)[0], 100, "nominal power 10.0 kW in 0.1 kW");
  assert.match(str(read(dev, 4, 4989, 10)), /^A2\d{9}$/);
  // Self-consumption at start: covers the 2 kW load, discharging bit set.
  assert.equal(read(dev, 3, 13049, 1)[0], 0);
  assert.equal(read(dev, 4, 13021, 1)[0], 2000);
  assert.equal(read(dev, 4, 13000, 1)[0] & 6, 4, "discharging bit");
  ok(dev, 13049, [2]);
  ok(dev, 13050, [0xaa]);
  ok(dev, 13051, [3000]);
  assert.equal(read(dev, 4, 13021, 1)[0], 3000, "magnitude");
  assert.equal(read(dev, 4, 13000, 1)[0] & 6, 2, "charging bit");
  assert.equal(bat.view().power_w, -3000);
  const soc = read(dev, 4, 13022, 1)[0];
  advance(3_600_000);
  assert.ok(read(dev, 4, 13022, 1)[0] > soc, "SOC rises while charging");
  assert.ok(dec.u32(read(dev, 4, 13040, 2), "lo-hi") >= 29, "charge energy counter, 0.1 kWh, low word first");
  ok(dev, 13050, [0xbb]);
  assert.equal(read(dev, 4, 13000, 1)[0] & 6, 4);
  assert.equal(bat.view().power_w, 3000);
  // Refused: a command not in the list, a mode not in the list, a power above the battery's limit.
  assert.equal(write(dev, 13050, [0x55]), 3);
  assert.equal(write(dev, 13049, [1]), 3);
  assert.equal(write(dev, 13051, [5001]), 3);
  assert.equal(write(dev, 33047, [0]), 3, "max discharge power starts at 0.01 kW");
  assert.equal(bat.view().power_w, 3000, "a refused write changes nothing");
  ok(dev, 13049, [0]);
  assert.equal(bat.view().mode, "self-consumption");
  assert.equal(
    code(() => read(dev, 4, 13100, 1)),
    2,
    "undocumented address",
  );
  assert.equal(
    code(() => read(dev, 3, 5000, 1)),
    2,
    "running values are input registers",
  );
});

test("huawei-sun2000: identity, charging-positive I32, forcible charge ends after its duration", () => {
  const { dev, bat, advance } = rig("huawei-sun2000");
  assert.equal(str(read(dev, 3, 30000, 15)), "SUN2000-10KTL-M1");
  assert.equal(dec.u32(read(dev, 3, 30073, 2), "hi-lo"), 10000);
  assert.equal(read(dev, 3, 47086, 1)[0], 2, "maximise self-consumption");
  ok(dev, 47247, u32hi(2500));
  ok(dev, 47083, [30]);
  ok(dev, 47246, [0]);
  ok(dev, 47100, [1]);
  assert.equal(dec.s32(read(dev, 3, 37765, 2), "hi-lo"), 2500, "positive while charging");
  assert.equal(read(dev, 3, 37006, 1)[0], 1, "working mode read-back: forcible");
  assert.equal(bat.view().power_w, -2500);
  assert.equal(dec.s32(read(dev, 3, 37113, 2), "hi-lo"), -4500, "meter: importing load + charge is negative");
  ok(dev, 47249, u32hi(4000));
  ok(dev, 47100, [2]);
  assert.equal(dec.s32(read(dev, 3, 37765, 2), "hi-lo"), -4000);
  advance(29 * 60_000);
  assert.equal(read(dev, 3, 47100, 1)[0], 2);
  advance(2 * 60_000);
  assert.equal(read(dev, 3, 47100, 1)[0], 0, "ended after 30 minutes");
  assert.equal(read(dev, 3, 37006, 1)[0], 4, "working mode read-back: maximise self-consumption");
  assert.equal(bat.view().mode, "self-consumption");
  // Refused: power above the maximum charging power, a period over a day, an unknown command.
  assert.equal(write(dev, 47247, u32hi(5001)), 3);
  assert.equal(write(dev, 47083, [1441]), 3);
  assert.equal(write(dev, 47100, [3]), 3);
  assert.equal(read(dev, 3, 37767, 1)[0], 0, "a reserved register inside the storage block");
  assert.equal(
    code(() => read(dev, 3, 37200, 1)),
    2,
    "outside the document's blocks",
  );
  assert.equal(
    code(() => read(dev, 4, 37765, 2)),
    2,
    "holding registers only",
  );
});

test("sma-storage: 32-bit values only, setpoint sign, 802/803 control, the fallback setpoint after the timeout", () => {
  const { dev, bat, advance } = rig("sma-storage", { revert_s: 60 });
  assert.deepEqual(read(dev, 3, 30051, 2), u32hi(8007));
  assert.deepEqual(read(dev, 3, 30053, 2), u32hi(9359));
  assert.equal(
    code(() => read(dev, 3, 30052, 1)),
    2,
    "half a value",
  );
  assert.equal(
    code(() => read(dev, 3, 30775, 1)),
    2,
  );
  assert.equal(
    code(() => read(dev, 3, 40149, 2)),
    2,
    "the setpoint is write-only",
  );
  assert.equal(
    code(() => read(dev, 3, 40151, 2)),
    2,
    "the control is write-only",
  );
  ok(dev, 40151, u32hi(802));
  ok(dev, 40149, s32hi(-3000));
  assert.deepEqual(read(dev, 3, 31393, 2), u32hi(3000), "charge power");
  assert.deepEqual(read(dev, 3, 31395, 2), u32hi(0));
  assert.equal(bat.view().power_w, -3000);
  ok(dev, 40149, s32hi(2500));
  assert.deepEqual(read(dev, 3, 31395, 2), u32hi(2500), "discharge power");
  assert.equal(dec.s32(read(dev, 3, 30775, 2), "hi-lo"), 2500, "AC power");
  assert.equal(write(dev, 40149, s32hi(5001)), 3);
  assert.equal(write(dev, 40151, u32hi(804)), 3);
  assert.equal(write(dev, 40149, [0x0000]), 2, "half a value cannot be written");
  advance(59_000);
  assert.equal(bat.view().mode, "forced-discharge");
  advance(2_000);
  assert.equal(bat.view().power_w, 0, "no new setpoint for 60 s: the fallback setpoint (0 W) applies");
  assert.equal(bat.view().mode, "forced-idle", "still under external control, at the fallback setpoint");
  ok(dev, 41215, s32hi(-1000));
  ok(dev, 41195, u32hi(30));
  ok(dev, 40149, s32hi(1000));
  advance(31_000);
  assert.equal(bat.view().power_w, -1000, "the written fallback after the written timeout");
  ok(dev, 40151, u32hi(803));
  assert.equal(bat.view().mode, "self-consumption", "803 releases");
  // The BMS path: operating mode with minimum charge/discharge powers.
  ok(dev, 40793, u32hi(2000));
  ok(dev, 40236, u32hi(2289));
  assert.deepEqual(read(dev, 4, 31393, 2), u32hi(2000), "function 4 reads the same values");
  ok(dev, 40797, u32hi(1500));
  ok(dev, 40236, u32hi(2290));
  assert.deepEqual(read(dev, 3, 31395, 2), u32hi(1500));
  assert.equal(write(dev, 40236, u32hi(2291)), 3);
  assert.equal(write(dev, 40795, u32hi(5001)), 3);
  ok(dev, 40236, u32hi(2424));
  assert.equal(bat.view().mode, "self-consumption");
});

test("sma-storage: the battery management path falls back to its defaults when its six registers are not rewritten in time", () => {
  const { dev, bat, advance } = rig("sma-storage", { revert_s: 60 });
  ok(dev, 40797, u32hi(1500));
  ok(dev, 40801, s32hi(0));
  ok(dev, 40236, u32hi(2290));
  assert.equal(bat.view().power_w, 1500);
  advance(50_000);
  ok(dev, 40801, s32hi(0)); // any of the six renews the timeout
  advance(50_000);
  assert.equal(bat.view().mode, "forced-discharge", "renewed 50 s ago: still forced");
  advance(11_000);
  assert.equal(bat.view().mode, "self-consumption", "not renewed for 61 s: back to its default");
  assert.deepEqual(read(dev, 3, 40236, 2), u32hi(2424));
  assert.deepEqual(read(dev, 3, 40797, 2), u32hi(0), "the minimum discharge power back to 0");
});

test("sma-storage as a Tripower Smart Energy (device class 8001): the battery management has no effect, 40149/40151 move the battery", () => {
  const { dev, bat } = rig("sma-storage", { device_class: 8001 });
  assert.deepEqual(read(dev, 3, 30051, 2), u32hi(8001));
  ok(dev, 40793, u32hi(2000));
  ok(dev, 40236, u32hi(2289));
  assert.equal(bat.view().mode, "self-consumption", "2289 acknowledged, without effect");
  ok(dev, 40151, u32hi(802));
  ok(dev, 40149, s32hi(-2000));
  assert.equal(bat.view().power_w, -2000);
});

test("solaredge-storedge: SunSpec readings, remote control, charging-positive float, timeout to the default mode", () => {
  const { dev, bat, advance } = rig("solaredge-storedge");
  assert.deepEqual(read(dev, 3, 40000, 4), [0x5375, 0x6e53, 1, 65]);
  assert.equal(str(read(dev, 3, 40004, 16)), "SolarEdge");
  assert.deepEqual(read(dev, 3, 40069, 2), [103, 50]);
  assert.deepEqual(read(dev, 3, 40121, 2), [1, 65]);
  assert.deepEqual(read(dev, 3, 40188, 2), [203, 105]);
  assert.equal(dec.s16(read(dev, 3, 40188 + 2 + 16, 1)[0]), 0, "meter W: load covered by the battery");
  ok(dev, 0xe004, [4]);
  ok(dev, 0xe005, [1]);
  ok(dev, 0xe00a, [7]);
  ok(dev, 0xe00b, u32lo(600));
  ok(dev, 0xe00e, f32lo(3000));
  ok(dev, 0xe00d, [3]);
  assert.equal(dec.f32(read(dev, 3, 0xe174, 2), "lo-hi"), 3000, "positive while charging");
  assert.equal(bat.view().power_w, -3000);
  assert.equal(dec.s16(read(dev, 3, 40188 + 2 + 16, 1)[0]), -5000, "SolarEdge's meter: import is negative");
  ok(dev, 0xe010, f32lo(2000));
  ok(dev, 0xe00d, [4]);
  assert.equal(dec.f32(read(dev, 3, 0xe174, 2), "lo-hi"), -2000);
  assert.equal(write(dev, 0xe00d, [6]), 3, "6 is not a command mode");
  assert.equal(write(dev, 0xe00e, f32lo(5001)), 3);
  assert.equal(write(dev, 0xe00b, u32lo(86401)), 3);
  advance(601_000);
  assert.equal(read(dev, 3, 0xe00d, 1)[0], 7, "back to the default mode after the timeout");
  assert.equal(bat.view().mode, "self-consumption");
  assert.equal(read(dev, 3, 0xe14c, 1)[0], 0, "reserved inside the battery block");
  assert.equal(
    code(() => read(dev, 3, 0xe200, 1)),
    2,
    "no second battery",
  );
});

test("solaredge-storedge: commands 1 and 2 charge from PV only, 1 only beyond the AC limit; 4 holds the AC at its limit; the AC never exceeds it", () => {
  // A 5 kW inverter with 8 kW of PV at full sun, the AC charge policy allowing AC charging.
  const { dev, bat, site } = rig("solaredge-storedge", { rated_power_w: 5000, pv_max_w: 8000, max_power_w: 5000 });
  site.pv_irradiance = 0.5; // 4 kW of PV, below the AC limit
  ok(dev, 0xe004, [4]);
  ok(dev, 0xe005, [1]);
  ok(dev, 0xe00e, f32lo(5000));
  ok(dev, 0xe00d, [1]);
  assert.equal(bat.view().power_w, 0, "1: no PV beyond the 5 kW AC limit, nothing to charge (no AC charging)");
  assert.equal(bat.view().ac_power_w, 4000, "all PV goes to the AC");
  site.pv_irradiance = 1; // 8 kW of PV
  assert.equal(bat.view().power_w, -3000, "1: the 3 kW beyond the AC limit charge the battery");
  assert.equal(bat.view().ac_power_w, 5000);
  site.pv_irradiance = 0.25; // 2 kW of PV
  ok(dev, 0xe00d, [2]);
  assert.equal(bat.view().power_w, -2000, "2: the PV's 2 kW, not the 5 kW charge limit from the AC");
  assert.equal(bat.view().ac_power_w, 0, "PV first into the battery, nothing drawn from the AC");
  ok(dev, 0xe00d, [3]);
  assert.equal(bat.view().power_w, -5000, "3: PV and AC up to the charge limit");
  ok(dev, 0xe010, f32lo(5000));
  ok(dev, 0xe00d, [4]);
  assert.equal(bat.view().power_w, 3000, "4: the battery makes up the 3 kW the PV lacks to the AC limit");
  assert.equal(bat.view().ac_power_w, 5000);
  site.pv_irradiance = 1;
  assert.equal(bat.view().power_w, -3000, "4: PV beyond the AC limit charges the battery");
  assert.equal(bat.view().ac_power_w, 5000, "and the AC stays at its limit");
});

test("goodwe-et: identity, discharging-positive S32, EMS modes 11/12 and auto, refusal", () => {
  const { dev, bat } = rig("goodwe-et");
  assert.equal(read(dev, 3, 35001, 1)[0], 10000);
  assert.equal(str(read(dev, 3, 35011, 5)), "GW10K-ET");
  assert.equal(read(dev, 3, 47511, 1)[0], 1);
  ok(dev, 47512, [3000]);
  ok(dev, 47511, [11]);
  assert.equal(dec.s32(read(dev, 3, 35182, 2), "hi-lo"), -3000, "negative while charging");
  assert.equal(read(dev, 3, 35184, 1)[0], 3);
  ok(dev, 47511, [12]);
  assert.equal(dec.s32(read(dev, 3, 35182, 2), "hi-lo"), 3000);
  assert.equal(dec.s16(read(dev, 3, 35140, 1)[0]), 1000, "exporting 1 kW");
  assert.equal(write(dev, 47511, [13]), 3);
  assert.equal(write(dev, 47511, [0]), 3);
  assert.equal(write(dev, 47512, [10001]), 3);
  ok(dev, 47511, [1]);
  assert.equal(bat.view().mode, "self-consumption");
  assert.deepEqual(read(dev, 3, 35186, 2), [0, 1], "35186 reserved inside the block, 35187 work mode");
  assert.equal(
    code(() => read(dev, 3, 35300, 1)),
    2,
    "outside the document's blocks",
  );
});

test("victron-gx: unit ids per service, charging-positive battery power, mode 3 setpoint with its watchdog", () => {
  const { devs, bat, advance } = rig("victron-gx", { unit: 100, vebus_unit: 227 });
  const [gx, vebus] = devs;
  assert.equal(gx.unit, 100);
  assert.equal(vebus.unit, 227);
  assert.match(str(read(gx, 3, 800, 6)), /^c0619a\d{6}$/);
  assert.equal(read(gx, 3, 2902, 1)[0], 1);
  ok(gx, 2902, [3]);
  ok(vebus, 37, [2500]);
  assert.equal(dec.s16(read(gx, 3, 842, 1)[0]), 2500, "positive while charging");
  assert.equal(dec.s16(read(gx, 4, 842, 1)[0]), 2500, "function 4 reads the same");
  assert.equal(read(gx, 3, 844, 1)[0], 1);
  assert.equal(bat.view().power_w, -2500);
  ok(vebus, 37, [-3000 & 0xffff]);
  assert.equal(dec.s16(read(gx, 3, 842, 1)[0]), -3000);
  assert.equal(write(gx, 2902, [4]), 3);
  assert.equal(write(gx, 2701, [101]), 3);
  assert.equal(write(vebus, 38, [2]), 3);
  advance(61_000);
  assert.equal(dec.s16(read(gx, 3, 842, 1)[0]), 0, "the setpoint drops to zero without a refresh");
  ok(gx, 2902, [1]);
  assert.equal(bat.view().mode, "self-consumption");
  assert.equal(
    code(() => read(vebus, 3, 842, 1)),
    2,
    "system registers are not on the VE.Bus unit",
  );
});

test("victron-gx: the installer's ESS mode; DisableFeedIn stops feed-in, not the discharge into the house load; in mode 1 the load moves the battery", () => {
  const { devs, bat, site } = rig("victron-gx", { unit: 100, vebus_unit: 227, ess_mode: 3, pv_max_w: 0 });
  const [gx, vebus] = devs;
  assert.equal(read(gx, 3, 2902, 1)[0], 3, "the scenario's ESS mode");
  ok(vebus, 37, [-3000 & 0xffff]);
  assert.equal(bat.view().power_w, 3000, "mode 3: the setpoint, whatever the load");
  ok(vebus, 39, [1]);
  assert.equal(bat.view().power_w, 2000, "no feed-in: the battery still covers the 2 kW house load");
  assert.equal(site.grid(), 0, "and nothing goes to the grid");
  ok(vebus, 37, [1000]);
  assert.equal(bat.view().power_w, -1000, "DisableFeedIn does not stop a charge");
  // Mode 1: the GX's loop holds the GRID at 2700, the battery makes up the load on top.
  const m1 = rig("victron-gx", { unit: 100, vebus_unit: 227, pv_max_w: 0 });
  assert.equal(read(m1.devs[0], 3, 2902, 1)[0], 1, "factory mode 1");
  ok(m1.devs[0], 2700, [-2000 & 0xffff]);
  assert.equal(m1.bat.view().power_w, 4000, "a 2 kW export setpoint with a 2 kW house load: 4 kW from the battery");
});

test("deye-hybrid: identity, low-word-first totals, program-driven grid charge and sell, release by the timer", () => {
  const { dev, bat, advance } = rig("deye-hybrid", { soc_pct: 50 });
  assert.equal(read(dev, 3, 0, 1)[0], 3, "single-phase hybrid");
  assert.equal(dec.u32(read(dev, 3, 16, 2), "lo-hi"), 80000, "rated 8 kW in 0.1 W");
  assert.equal(read(dev, 3, 79, 1)[0], 5000, "grid frequency between the grid import's two words");
  assert.equal(dec.s16(read(dev, 3, 190, 1)[0]), 2000, "self-consumption: discharging positive");
  ok(dev, 248, [1]);
  ok(dev, 232, [1]);
  ok(dev, 230, [50]);
  ok(dev, 268, [90]);
  ok(dev, 274, [1]);
  const w = dec.s16(read(dev, 3, 190, 1)[0]);
  assert.ok(w < -2000 && w > -3000, `grid charge at 50 A: ${w}`);
  assert.equal(bat.view().mode, "forced-charge");
  ok(dev, 268, [20]);
  ok(dev, 256, [3000]);
  ok(dev, 274, [0x40]);
  assert.equal(dec.s16(read(dev, 3, 190, 1)[0]), 3000, "selling at the program's power");
  assert.equal(write(dev, 210, [186]), 3);
  assert.equal(write(dev, 250, [2460]), 3);
  assert.equal(write(dev, 256, [8001]), 3);
  advance(3 * 3_600_000);
  assert.equal(bat.view().mode, "self-consumption", "05:30: the second program (no flags) is in force");
  ok(dev, 248, [0]);
  assert.equal(bat.view().mode, "self-consumption");
  assert.equal(
    code(() => read(dev, 3, 400, 1)),
    2,
  );
});

test("meters: sdm120 single-phase, sdm72 three-phase floats; em24 low-word-first INT32 with its id code", () => {
  const sdm120 = rig("sdm120").dev;
  const f = (w: number[]) => {
    const b = Buffer.alloc(4);
    b.writeUInt16BE(w[0], 0);
    b.writeUInt16BE(w[1], 2);
    return b.readFloatBE(0);
  };
  assert.equal(f(read(sdm120, 4, 0x0c, 2)), 2000, "grid import with no source");
  assert.deepEqual(read(sdm120, 4, 0x02, 2), [0, 0], "no L2 on a single-phase meter: reserved, 0.0");
  assert.equal(
    code(() => read(sdm120, 4, 0x200, 2)),
    2,
    "beyond the input block",
  );
  assert.equal(read(sdm120, 3, 0xfc02, 1)[0], 0x0020);
  const sdm72 = rig("sdm72", { reads: "load" }).dev;
  assert.equal(f(read(sdm72, 4, 0x34, 2)), 2000);
  assert.equal(read(sdm72, 3, 0xfc02, 1)[0], 0x0089);
  const em = rig("em24");
  assert.equal(read(em.dev, 3, 0x000b, 1)[0], 70, "EM24-DIN AV9");
  assert.equal(read(em.dev, 4, 0x000b, 1)[0], 70, "function 4 reads the same table");
  assert.equal(dec.s32(read(em.dev, 3, 0x0028, 2), "lo-hi"), 20000, "W sys x10");
  em.advance(3_600_000);
  assert.equal(dec.s32(read(em.dev, 3, 0x003e, 2), "lo-hi"), 20, "2 kWh imported, x10");
  assert.equal(read(em.dev, 4, 0x0037, 1)[0], 500, "Hz x10");
  assert.equal(
    code(() => read(em.dev, 3, 0x5000, 7)),
    2,
    "the RS-485 EM24 keeps its serial at 0x1300",
  );
  assert.equal(write(em.dev, 0x1101, [8]), 3);
  ok(em.dev, 0x1101, [7]);
  const e1 = rig("em24", { variant: "em24-e1" });
  assert.equal(read(e1.dev, 3, 0x000b, 1)[0], 1648);
  e1.advance(1_800_000);
  assert.equal(dec.s32(read(e1.dev, 3, 0x0034, 2), "lo-hi"), 10, "the E1's kWh (+) at 0x0034");
  assert.equal(read(rig("em24", { variant: "em340" }).dev, 3, 0x000b, 1)[0], 341);
  assert.equal(write(em.dev, 0x0028, [1, 2]), 2);
});

test("unknown: answers any register with the same seeded word, refuses writes", () => {
  const { site } = rig("sungrow-sh");
  const spec = deviceSchema.parse({ unit: 20, name: "stranger", model: "unknown" });
  assert.equal(spec.model, "unknown");
  const make = () => new UnknownDevice({ name: "stranger", unit: 20 }, site.seed);
  const a = make();
  const words = read(a, 3, 40000, 4);
  assert.notDeepEqual(words, [0x5375, 0x6e53, 1, 66], "not SunSpec");
  assert.deepEqual(read(make(), 3, 40000, 4), words, "deterministic for a seed");
  assert.equal(read(a, 4, 4999, 1).length, 1);
  assert.equal(write(a, 13049, [2]), 2);
});

test("deye-hybrid three-phase: its own addresses, selling first by the load limit, currents up to 240 A", () => {
  const { dev, bat } = rig("deye-hybrid", { variant: "three-phase", soc_pct: 50 });
  assert.equal(read(dev, 3, 0, 1)[0], 5, "LV three-phase hybrid");
  assert.equal(dec.u32(read(dev, 3, 20, 2), "lo-hi"), 80000, "rated power at 20/21");
  assert.equal(dec.s16(read(dev, 3, 590, 1)[0]), 2000, "battery power at 590, discharging positive");
  assert.equal(read(dev, 3, 588, 1)[0], 50);
  assert.equal(read(dev, 3, 142, 1)[0], 2, "zero export to CT at start");
  ok(dev, 146, [1]);
  ok(dev, 130, [1]);
  ok(dev, 128, [40]);
  for (let i = 0; i < 6; i++) ok(dev, 166 + i, [90]);
  for (let i = 0; i < 6; i++) ok(dev, 172 + i, [1]);
  assert.ok(dec.s16(read(dev, 3, 590, 1)[0]) < -1500, "grid charge");
  for (let i = 0; i < 6; i++) ok(dev, 166 + i, [10]);
  for (let i = 0; i < 6; i++) ok(dev, 154 + i, [3000]);
  ok(dev, 142, [0]);
  assert.equal(dec.s16(read(dev, 3, 590, 1)[0]), 3000, "selling first at the program's power");
  assert.equal(write(dev, 108, [241]), 3);
  assert.equal(write(dev, 128, [186]), 3);
  ok(dev, 108, [240]);
  ok(dev, 146, [0]);
  assert.equal(bat.view().mode, "self-consumption");
  assert.equal(read(dev, 3, 700, 1)[0], 0, "reserved inside the block");
  assert.equal(
    code(() => read(dev, 3, 400, 1)),
    2,
  );
});

test("deye-hybrid: the two readings of out-of-order program times, and of what limits a grid charge, on the site's local clock", () => {
  // 08:37 UTC: 09:37 in Berlin, 17:37 in Tokyo. Programs 1 and 2 written 00:00 and 23:55,
  // 3-6 left at 09:00, 13:00, 17:00, 21:00: out of order.
  const at = (timezone: string, extra: Record<string, unknown>) => {
    const r = rig("deye-hybrid", { variant: "three-phase", soc_pct: 50, ...extra }, { timezone, at: Date.UTC(2026, 10, 28, 8, 37) });
    ok(r.dev, 146, [0xff]);
    ok(r.dev, 130, [1]);
    ok(r.dev, 128, [40]);
    ok(r.dev, 148, [0]);
    ok(r.dev, 149, [2355]);
    ok(r.dev, 154, [1000, 1000]);
    ok(r.dev, 166, [100, 100]);
    ok(r.dev, 172, [1, 1]);
    return r;
  };
  const w = (r: ReturnType<typeof rig>) => dec.s16(read(r.dev, 3, 590, 1)[0]);
  const v = (r: ReturnType<typeof rig>) => read(r.dev, 3, 587, 1)[0] / 100;

  const latest = at("Europe/Berlin", {});
  assert.equal(latest.bat.view().mode, "self-consumption", "latest-start: program 3 (09:00) is in force, it does not charge");
  const ascending = at("Europe/Berlin", { program_times: "ascending" });
  assert.equal(ascending.bat.view().mode, "forced-charge", "ascending: 09:00 after 23:55 does not count, program 1 is in force");
  assert.ok(Math.abs(w(ascending) + 40 * v(ascending)) <= 1, `at the grid-charge current: ${w(ascending)} W`);
  const byPower = at("Europe/Berlin", { program_times: "ascending", grid_charge_limit: "program-power" });
  assert.equal(w(byPower), -1000, "at the program's power");
  // In Tokyo it is 17:37: program 5 (17:00) under latest-start, program 1 under ascending.
  assert.equal(at("Asia/Tokyo", {}).bat.view().mode, "self-consumption");
  assert.equal(at("Asia/Tokyo", { program_times: "ascending" }).bat.view().mode, "forced-charge");
  // In order, the readings agree: every program in force in its own window.
  const inOrder = at("Europe/Berlin", {});
  ok(inOrder.dev, 149, [500]);
  ok(inOrder.dev, 150, [900]);
  ok(inOrder.dev, 168, [100]);
  ok(inOrder.dev, 174, [1]);
  assert.equal(inOrder.bat.view().mode, "forced-charge", "program 3 (09:00) charges");
  ok(inOrder.dev, 174, [0]);
  assert.equal(inOrder.bat.view().mode, "self-consumption");
});

test("the brand table: each row is a built-in profile's model, its places on the brands site build its model, a battery row says how its registers read and move it", () => {
  const site = new SiteModel(
    { base_load_w: 2000, load_noise_pct: 0, pv_irradiance: 0, tz_offset_h: 0, voltage_v: 230, frequency_hz: 50 },
    7,
    () => START,
  );
  for (const r of BRANDS) {
    const profile = builtinProfiles().get(r.model);
    assert.equal(profile.kind, "fixed", `${r.model}: a built-in profile of the same name`);
    if (profile.kind === "fixed") assert.equal(profile.role, r.kind, `${r.model}: the profile's role is the row's kind`);
    assert.equal(r.kind === "battery", r.battery !== undefined, `${r.model}: a battery row, and only one, reads its battery`);
    for (const a of ["charge", "discharge", "release"] as const)
      if (r.battery) assert.ok(r.battery.commands[a].length, `${r.model}: raw ${a} commands`);
    const places = brandPlacements().filter((d) => d.model === r.model);
    assert.ok(places.length, `${r.model} is on the brands site`);
    for (const d of places) {
      const devs = buildBrandDevices(deviceSchema.parse(d.device), site);
      assert.equal(devs[0]!.model, r.model, `${d.placement.name} builds its row's model`);
    }
  }
  assert.throws(() => brandRow("no-such-brand"), /no brand model "no-such-brand"/);
});
