// Control values to register writes: engineering value / 10^sf with the device's scale
// factor, the range checks that refuse a whole action before anything is written, the
// scale-factor reads (once per pairing, never a raw fallback), the profile schema
// of a step that names its scale factor, and the steps of settings kept in flash
// (count, per, flash: written only where a register holds another value).
import { test } from "node:test";
import assert from "node:assert/strict";
import { SitegateError, isSitegateError } from "../../src/errors.js";
import { decodeScaleFactor, planWrites, readScaleFactors, toRaw, type ControlTarget } from "../../src/modbus/device/control-values.js";
import { profileSchema, type WriteStep } from "../../src/profiles/schema.js";
import { builtinProfiles } from "../../src/profiles/registry.js";
import type { DeviceDriver } from "../../src/modbus/device/driver.js";
import { changedOnly } from "../../src/modbus/device/flash.js";
import type { CellRead } from "../../src/modbus/device/pre-state.js";

const M124 = 40100;
const M123 = 40200;

/** A paired SunSpec storage inverter with models 123 and 124 at fixed addresses. */
function target(opts: { models?: number[]; max_power_w?: number } = {}): ControlTarget {
  const models = new Map((opts.models ?? [123, 124]).map((m) => [m, m === 124 ? M124 : M123]));
  return {
    descriptor: { max_power_w: opts.max_power_w ?? 5000 },
    resolveWrite(step: WriteStep) {
      if (step.address !== undefined) return { table: step.table, address: step.address };
      const base = models.get(step.model!);
      if (base === undefined) throw new SitegateError("DEVICE_NOT_FOUND", `no model ${step.model}`);
      return { table: step.table, address: base + step.offset! };
    },
  };
}

const sunspec = builtinProfiles().get("sunspec");
const discharge = sunspec.actions.discharge!;
const curtail = sunspec.actions.curtail!;
const invalid = (e: unknown) => isSitegateError(e, "CONTROL_VALUE_INVALID");
const word = (sf: number) => sf & 0xffff;

test("60 % is written as 6000 at SF -2, 600 at -1, 60 at 0 and 6 at 1", () => {
  for (const [sf, raw] of [
    [-2, 6000],
    [-1, 600],
    [0, 60],
    [1, 6],
  ] as const) {
    const w = planWrites(target(), discharge, { pct: 60 }, new Map([[M124 + 25, sf]]));
    assert.deepEqual(
      w.map((x) => [x.address, x.words]),
      [
        [M124 + 15, [60]],
        [M124 + 12, [raw]],
        [M124 + 5, [2]],
      ],
      `sf ${sf}`,
    );
    const c = planWrites(target(), curtail, { pct: 45 }, new Map([[M123 + 23, sf]]));
    assert.deepEqual(c[1].words, [Math.round(45 / 10 ** sf)], `curtail at sf ${sf}`);
  }
  assert.equal(toRaw(0.29, -2, "s16"), 29, "decimal values stay exact");
  assert.equal(toRaw(33.33, -2, "u16"), 3333);
});

test("a value outside 0..100 % or the step's range refuses the whole action", () => {
  const sfs = new Map([[M124 + 25, -2]]);
  for (const pct of [100.01, -1, Number.NaN, Number.POSITIVE_INFINITY, undefined]) {
    assert.throws(() => planWrites(target(), discharge, { pct }, sfs), invalid, String(pct));
  }
  assert.equal(planWrites(target(), discharge, { pct: 100 }, sfs)[1].words[0], 10000);
  assert.equal(planWrites(target(), discharge, { pct: 0 }, sfs)[1].words[0], 0);
  // A profile that declares no range still never writes a percent outside 0..100.
  const bare: WriteStep[] = [{ table: "holding", address: 7, type: "u16", value: "$pct" }];
  assert.throws(() => planWrites(target(), bare, { pct: 150 }), /150 % is outside 0\.\.100 %/);
  assert.deepEqual(planWrites(target(), bare, { pct: 100 })[0].words, [100]);
  const narrow: WriteStep[] = [{ table: "holding", model: 124, offset: 12, type: "s16", value: "$pct", sf_offset: 25, range: [10, 50] }];
  assert.throws(() => planWrites(target(), narrow, { pct: 60 }, sfs), /outside the device's range 10\.\.50/);
});

test("a missing scale factor never falls back to an unscaled value; a raw value the register cannot hold is refused", () => {
  assert.throws(() => planWrites(target(), discharge, { pct: 60 }, new Map()), /scale factor at register 40125 was not read/);
  // SF -3: 100 % is raw 100000, more than an int16 holds.
  assert.throws(() => planWrites(target(), discharge, { pct: 100 }, new Map([[M124 + 25, -3]])), /cannot hold/);
});

test("watts are checked against the device's rated power, and a range bound of $max_power_w needs it", () => {
  const steps: WriteStep[] = [{ table: "holding", address: 10, type: "u16", value: "$watts", range: [0, "$max_power_w"] }];
  assert.deepEqual(planWrites(target(), steps, { watts: 4999.6 })[0].words, [5000]);
  assert.throws(() => planWrites(target(), steps, { watts: 5001 }), /outside the device's 0\.\.5000 W/);
  assert.throws(() => planWrites(target(), steps, { watts: -1 }), invalid);
  const unrated: ControlTarget = { ...target(), descriptor: {} };
  assert.throws(() => planWrites(unrated, steps, { watts: 100 }), /did not report its rated power/);
});

test("steps of a model the device lacks are skipped, and so is their scale factor", () => {
  const pvOnly = target({ models: [123] });
  assert.deepEqual(planWrites(pvOnly, discharge, { pct: 60 }, new Map()), []);
  const rel = planWrites(pvOnly, sunspec.actions.release!, {}, new Map());
  assert.deepEqual(
    rel.map((w) => w.address),
    [M123 + 9, M123 + 4],
  );
});

test("scale-factor words: -2 is 0xFFFE, 'not implemented' and nonsense are refused", () => {
  assert.equal(decodeScaleFactor(0xfffe, 1), -2);
  assert.equal(decodeScaleFactor(1, 1), 1);
  assert.throws(() => decodeScaleFactor(0x8000, 7), /register 7 is not implemented/);
  assert.throws(() => decodeScaleFactor(11, 7), invalid);
  assert.throws(() => decodeScaleFactor(word(-11), 7), invalid);
});

/** The driver surface readScaleFactors uses, over a register map; counts the reads. */
function fakeDriver(regs: Map<number, number>, fail = false) {
  const t = target();
  const d = {
    ...t,
    descriptor: { max_power_w: 5000 } as object | null,
    unit: 1,
    timeoutMs: 500,
    reads: [] as number[],
    bus: {
      read: async (_unit: number, _table: string, address: number) => {
        d.reads.push(address);
        if (fail) throw new SitegateError("MODBUS_TIMEOUT", "no answer", { transient: true });
        return [regs.get(address) ?? 0x8000];
      },
    },
  };
  return d;
}

test("scale factors are read once per pairing; a failed or unimplemented read throws and is not remembered", async () => {
  const d = fakeDriver(
    new Map([
      [M124 + 25, word(-2)],
      [M123 + 23, word(-1)],
    ]),
  );
  const drv = d as unknown as DeviceDriver;
  assert.deepEqual([...(await readScaleFactors(drv, discharge))], [[M124 + 25, -2]]);
  assert.deepEqual(
    [...(await readScaleFactors(drv, [...discharge, ...curtail]))].sort((a, b) => a[0] - b[0]),
    [
      [M124 + 25, -2],
      [M123 + 23, -1],
    ],
  );
  await readScaleFactors(drv, discharge);
  assert.deepEqual(d.reads, [M124 + 25, M123 + 23], "each scale factor read once");
  d.descriptor = { max_power_w: 5000 }; // paired again
  await readScaleFactors(drv, discharge);
  assert.deepEqual(d.reads, [M124 + 25, M123 + 23, M124 + 25]);

  const ni = fakeDriver(new Map());
  await assert.rejects(readScaleFactors(ni as unknown as DeviceDriver, discharge), /not implemented/);
  await assert.rejects(readScaleFactors(ni as unknown as DeviceDriver, discharge), /not implemented/);
  assert.equal(ni.reads.length, 2, "a bad scale factor is read again next time");
  const dead = fakeDriver(new Map(), true);
  await assert.rejects(
    readScaleFactors(dead as unknown as DeviceDriver, discharge),
    (e: unknown) => isSitegateError(e, "MODBUS_TIMEOUT") && /nothing written/.test((e as Error).message) && (e as SitegateError).transient,
  );
});

test("the profile schema: sf_offset needs a model, one scale factor per step, coils take none, range min <= max", () => {
  const base = { name: "x", kind: "fixed", role: "switch", points: [{ metric: "state", table: "coil", address: 0 }] };
  const withStep = (step: Record<string, unknown>) => profileSchema.safeParse({ ...base, actions: { charge: [step] } });
  assert.equal(withStep({ address: 5, value: "$pct", sf_address: 6, range: [0, 100] }).success, true);
  assert.equal(withStep({ model: 124, offset: 12, value: "$pct", sf_offset: 25, range: [0, "$max_power_w"] }).success, true);
  const paths = (step: Record<string, unknown>) => {
    const r = withStep(step);
    return r.success ? [] : r.error.issues.map((i) => i.path.slice(-1)[0]);
  };
  assert.deepEqual(paths({ address: 5, value: "$pct", sf_offset: 25 }), ["sf_offset"]);
  assert.deepEqual(paths({ model: 124, offset: 12, value: "$pct", sf_offset: 25, sf_address: 3 }), ["sf_address"]);
  assert.deepEqual(paths({ table: "coil", address: 1, value: "$on", sf_address: 3 }), ["table"]);
  assert.deepEqual(paths({ address: 5, value: "$pct", range: [100, 0] }), ["range"]);
  assert.deepEqual(paths({ address: 5, value: 120, range: [0, 100] }), ["value"]);
  assert.equal(withStep({ address: 5, value: "$pct", scale_factor: "x" }).success, false, "an unknown key in a profile step is an error");
});

test("a scale-factor read answered with no word is refused as MODBUS_BAD_RESPONSE, not taken as a scale factor", async () => {
  const d = fakeDriver(new Map());
  d.bus.read = async (_unit: number, _table: string, address: number) => {
    d.reads.push(address);
    return [];
  };
  await assert.rejects(
    readScaleFactors(d as unknown as DeviceDriver, discharge),
    (e: unknown) =>
      isSitegateError(e, "MODBUS_BAD_RESPONSE") && /no word/.test((e as Error).message) && /nothing written/.test((e as Error).message),
  );
});

test("count writes one value to consecutive registers; per divides by a live reading before the range check; flash marks the write", () => {
  const steps: WriteStep[] = [
    { table: "holding", address: 154, type: "u16", count: 6, value: "$watts", flash: true },
    {
      table: "holding",
      address: 128,
      type: "u16",
      value: "$watts",
      per: { table: "holding", address: 587, type: "u16", scale: 0.01 },
      range: [0, 185],
    },
  ];
  const live = new Map([["holding:587", 51.2]]);
  const [programs, current] = planWrites(target(), steps, { watts: 1500 }, new Map(), live);
  assert.deepEqual(programs!.words, [1500, 1500, 1500, 1500, 1500, 1500]);
  assert.equal(programs!.flash, true);
  assert.deepEqual(current!.words, [29], "1500 W / 51.2 V = 29.3 A");
  assert.equal(current!.flash, undefined);
  assert.throws(() => planWrites(target(), steps, { watts: 1500 }), /register 587 was not read; nothing written/);
  assert.throws(
    () => planWrites(target(), steps, { watts: 1500 }, new Map(), new Map([["holding:587", 0]])),
    /reads 0, which no value can be divided by/,
  );
  assert.throws(
    () => planWrites(target(), steps, { watts: 5000 }, new Map(), new Map([["holding:587", 20]])),
    /250 is outside the device's range 0\.\.185/,
  );
});

test("a flash write goes out only to the registers that hold another value, as runs of neighbours", async () => {
  const now = [1500, 1, 1500, 1500, 9, 9];
  const read: CellRead = async (_t, address, count) => now.slice(address - 154, address - 154 + count);
  const w = { table: "holding" as const, address: 154, words: [1500, 1500, 1500, 1500, 1500, 1500], coils: [], flash: true };
  assert.deepEqual(
    (await changedOnly(w, read)).map((x) => [x.address, x.words]),
    [
      [155, [1500]],
      [158, [1500, 1500]],
    ],
  );
  assert.deepEqual(await changedOnly({ ...w, words: now.slice() }, read), [], "all hold: nothing to write");
  const plain = { ...w, flash: undefined };
  assert.deepEqual(await changedOnly(plain, read), [plain], "not flash: as it is, without a read");
});

test("the profile schema: count, flash and per are for holding registers; per divides a power or a percent; a write-only register is not flash", () => {
  const base = { name: "x", kind: "fixed", role: "battery", points: [{ metric: "power_w", address: 0 }] };
  const paths = (step: Record<string, unknown>) => {
    const r = profileSchema.safeParse({ ...base, actions: { charge: [step] } });
    return r.success ? [] : r.error.issues.map((i) => i.path.slice(-1)[0]);
  };
  assert.deepEqual(paths({ address: 154, count: 6, value: "$watts", flash: true, per: { address: 587, scale: 0.01 } }), []);
  assert.deepEqual(paths({ table: "coil", address: 1, value: "$on", flash: true }), ["table"]);
  assert.deepEqual(paths({ address: 5, value: 3, per: { address: 587 } }), ["per"]);
  assert.deepEqual(paths({ address: 5, value: 3, restore: 0, flash: true }), ["flash"]);
  assert.deepEqual(paths({ address: 5, value: 3, count: 17 }), ["count"]);
});
