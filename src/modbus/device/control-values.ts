// Control values from engineering units to register writes. A profile's action steps
// carry percent or watts; a device that publishes a scale factor for the register
// (SunSpec `*_SF`) wants round(value / 10^sf) written, and every value is range-checked
// first: an action with one bad value writes nothing at all. The scale factor is read
// from the device once per pairing; one that cannot be read fails the write, it never
// falls back to writing the engineering value raw.
import { SitegateError, errorMessage } from "../../errors.js";
import { PRIORITY } from "../bus.js";
import { encodeValue, typeRegs, type ValueType } from "../codec.js";
import type { DeviceDriver } from "./driver.js";
import type { DeviceDescriptor } from "../../model/device.js";
import { enumValue, type WriteStep } from "../../profiles/schema.js";
import type { RawWrite as Write, ActionParams as ControlParams } from "./raw-write.js";

export type { RawWrite as Write, ActionParams as ControlParams } from "./raw-write.js";

/** What planning needs of a paired device: where a step writes, and its rated power. */
export interface ControlTarget {
  resolveWrite(step: WriteStep): Where;
  readonly descriptor: Pick<DeviceDescriptor, "max_power_w"> | null;
  /** The profile's named constants (value: ems_mode.forced). */
  readonly profile?: { enums: Record<string, Record<string, number>> };
}

type Where = { table: "holding" | "coil"; address: number; unit?: number };

/** Scale factors as SunSpec allows them; anything else is a device fault, not a factor. */
const SF_MIN = -10;
const SF_MAX = 10;

function invalid(message: string): SitegateError {
  return new SitegateError("CONTROL_VALUE_INVALID", message);
}

/** The step's register, or null when the device lacks the step's SunSpec model (the step is skipped). */
function resolve(target: ControlTarget, step: WriteStep): Where | null {
  try {
    return target.resolveWrite(step);
  } catch (e) {
    if (e instanceof SitegateError && e.code === "DEVICE_NOT_FOUND") return null;
    throw e;
  }
}

/** Absolute holding register of the step's scale factor, if it names one. */
export function scaleFactorAddress(target: ControlTarget, step: WriteStep): number | undefined {
  if (step.sf_address !== undefined) return step.sf_address;
  if (step.sf_offset === undefined) return undefined;
  return target.resolveWrite({ ...step, table: "holding", address: undefined, offset: step.sf_offset }).address;
}

/** A scale-factor register's word as an exponent; throws on "not implemented" and nonsense. */
export function decodeScaleFactor(word: number, address: number): number {
  if (word === 0x8000)
    throw invalid(`scale factor at register ${address} is not implemented (0x8000); refusing to write an unscaled value`);
  const sf = word >= 0x8000 ? word - 0x10000 : word;
  if (sf < SF_MIN || sf > SF_MAX)
    throw invalid(`scale factor at register ${address} is ${sf}, outside ${SF_MIN}..${SF_MAX}; refusing to write`);
  return sf;
}

/** value / 10^sf, exact for decimal values (60 at -2 is 6000, not 5999.999...). */
export function toRaw(value: number, sf: number, type: ValueType): number {
  const v = sf < 0 ? value * 10 ** -sf : sf > 0 ? value / 10 ** sf : value;
  return type === "f32" || type === "f64" ? v : Math.round(v);
}

function bound(b: number | "$max_power_w", target: ControlTarget): number | undefined {
  return b === "$max_power_w" ? target.descriptor?.max_power_w : b;
}

function describe(step: WriteStep, where: { address: number; unit?: number }): string {
  const unit = where.unit === undefined ? "" : ` of unit ${where.unit}`;
  return `${typeof step.value === "string" ? step.value : "value"} for register ${where.address}${unit}`;
}

/** Where a step's `per` reading is ("holding:587", "227/holding:587" on a sub-device), as the key of the live readings planWrites takes. */
export function perKey(step: WriteStep): string {
  return `${step.unit === undefined ? "" : `${step.unit}/`}${step.per?.table}:${step.per?.address}`;
}

/** The engineering value of a numeric step, divided by its live reading (`per`), range-checked. */
function engineeringValue(
  target: ControlTarget,
  step: WriteStep,
  params: ControlParams,
  where: { address: number },
  live: ReadonlyMap<string, number>,
): number {
  let value: number;
  const what = describe(step, where);
  switch (step.value) {
    case "$pct":
      if (params.pct === undefined || !Number.isFinite(params.pct)) throw invalid(`${what}: no percent given`);
      value = params.pct;
      if (value < 0 || value > 100) throw invalid(`${what}: ${value} % is outside 0..100 %`);
      break;
    case "$watts": {
      if (params.watts === undefined || !Number.isFinite(params.watts)) throw invalid(`${what}: no power given`);
      value = Math.round(params.watts);
      const max = target.descriptor?.max_power_w;
      if (value < 0 || (max !== undefined && value > max)) throw invalid(`${what}: ${value} W is outside the device's 0..${max ?? "?"} W`);
      break;
    }
    case "$on":
      value = 1;
      break;
    case "$off":
      value = 0;
      break;
    default:
      if (typeof step.value === "number") value = step.value;
      else {
        const named = enumValue(target.profile?.enums ?? {}, step.value);
        if (named === undefined) throw invalid(`${what}: the profile has no named value ${step.value}`);
        value = named;
      }
  }
  if (step.per) {
    const by = live.get(perKey(step));
    if (by === undefined) throw invalid(`${what}: ${step.per.table} register ${step.per.address} was not read; nothing written`);
    if (!(by > 0)) throw invalid(`${what}: ${step.per.table} register ${step.per.address} reads ${by}, which no value can be divided by`);
    value /= by;
  }
  if (step.range) {
    const lo = bound(step.range[0], target);
    const hi = bound(step.range[1], target);
    if (lo === undefined || hi === undefined)
      throw invalid(`${what}: the device did not report its rated power, so the range cannot be checked`);
    if (value < lo || value > hi) throw invalid(`${what}: ${value} is outside the device's range ${lo}..${hi}`);
  }
  return value;
}

/** The words that put a write-only register back: the step's `restore` value, encoded like the step's value. */
function restoreWords(target: ControlTarget, step: WriteStep, where: Where): number[] {
  const v =
    typeof step.restore === "number"
      ? step.restore
      : step.restore === "$max_power_w"
        ? target.descriptor?.max_power_w
        : enumValue(target.profile?.enums ?? {}, step.restore!);
  if (v === undefined) {
    const why =
      step.restore === "$max_power_w" ? "the device did not report its rated power" : `the profile has no named value ${step.restore}`;
    throw invalid(`restore value for write-only register ${where.address}: ${why}; nothing written`);
  }
  try {
    return encodeValue(step.type, v, step.word_order ?? "big");
  } catch (e) {
    throw invalid(`restore value ${v} for register ${where.address} does not fit ${step.type} (${errorMessage(e)})`);
  }
}

function unitOf(where: Where): { unit?: number } {
  return where.unit === undefined ? {} : { unit: where.unit };
}

/** The engineering value times the step's scale, exact for decimal scales (x 0.1 is / 10). */
function scaled(value: number, scale: number): number {
  if (scale === 1) return value;
  return Number.isInteger(1 / scale) ? value / (1 / scale) : value * scale;
}

/**
 * Resolves an action's steps to register and coil writes, given the scale factors read
 * from the device (by register address). Steps of models the device lacks are skipped.
 * Pure: throws CONTROL_VALUE_INVALID before returning anything when any value is bad.
 */
export function planWrites(
  target: ControlTarget,
  steps: readonly WriteStep[],
  params: ControlParams,
  sfs: ReadonlyMap<number, number> = new Map(),
  live: ReadonlyMap<string, number> = new Map(),
): Write[] {
  const out: Write[] = [];
  for (const step of steps) {
    const where = resolve(target, step);
    if (!where) continue;
    if (where.table === "coil") {
      const on = step.value === "$on" ? true : step.value === "$off" ? false : engineeringValue(target, step, params, where, live) !== 0;
      const last = out[out.length - 1];
      // Neighbouring coils go out as one write-multiple-coils request.
      if (last && last.table === "coil" && last.unit === where.unit && last.address + last.coils.length === where.address)
        last.coils.push(on);
      else out.push({ table: "coil", address: where.address, ...unitOf(where), words: [], coils: [on] });
      continue;
    }
    const value = engineeringValue(target, step, params, where, live);
    const sfAt = scaleFactorAddress(target, step);
    let sf = 0;
    if (sfAt !== undefined) {
      const known = sfs.get(sfAt);
      if (known === undefined)
        throw invalid(`${describe(step, where)}: scale factor at register ${sfAt} was not read; refusing to write an unscaled value`);
      sf = known;
    }
    const raw = toRaw(scaled(value, step.scale ?? 1), sf, step.type);
    let words: number[];
    try {
      const one = encodeValue(step.type, raw, step.word_order ?? "big");
      words = Array.from({ length: step.count ?? 1 }, () => one).flat();
    } catch (e) {
      throw invalid(
        `${describe(step, where)}: ${value} at scale factor ${sf} is raw ${raw}, which ${step.type} cannot hold (${errorMessage(e)})`,
      );
    }
    const restore = step.restore === undefined ? {} : { restore: restoreWords(target, step, where) };
    out.push({ table: "holding", address: where.address, ...unitOf(where), ...restore, ...flashOf(step), words, coils: [] });
  }
  return out;
}

function flashOf(step: WriteStep): { flash?: true } {
  return step.flash ? { flash: true } : {};
}

/**
 * The registers and coils an action's steps touch, without their values (no scale factor
 * read, no power needed): what the ledger's pre-event state has to cover. A write-only
 * register carries its `restore` words. Steps of models the device lacks are skipped.
 */
export function actionCells(target: ControlTarget, steps: readonly WriteStep[]): Write[] {
  const out: Write[] = [];
  for (const step of steps) {
    const where = resolve(target, step);
    if (!where) continue;
    if (where.table === "coil") {
      const last = out[out.length - 1];
      if (last && last.table === "coil" && last.unit === where.unit && last.address + last.coils.length === where.address)
        last.coils.push(false);
      else out.push({ table: "coil", address: where.address, ...unitOf(where), words: [], coils: [false] });
      continue;
    }
    const words = new Array<number>(typeRegs(step.type) * (step.count ?? 1)).fill(0);
    const restore = step.restore === undefined ? {} : { restore: restoreWords(target, step, where) };
    out.push({ table: "holding", address: where.address, ...unitOf(where), ...restore, ...flashOf(step), words, coils: [] });
  }
  return out;
}

/** Scale factors already read, per pairing (a new pairing makes a new descriptor, and they are read again). */
const cache = new WeakMap<object, Map<number, number>>();

/** Reads (or recalls) the scale factors the steps name. A failed read throws: the write must not happen. */
export async function readScaleFactors(driver: DeviceDriver, steps: readonly WriteStep[]): Promise<Map<number, number>> {
  const key = driver.descriptor;
  const known = (key && cache.get(key)) || new Map<number, number>();
  for (const step of steps) {
    if (step.table === "coil" || !resolve(driver, step)) continue;
    const at = scaleFactorAddress(driver, step);
    if (at === undefined || known.has(at)) continue;
    let word: number;
    try {
      const [w] = await driver.bus.read(step.unit ?? driver.unit, "holding", at, 1, {
        priority: PRIORITY.control,
        timeoutMs: driver.timeoutMs,
        retries: 1,
      });
      if (w === undefined) throw new SitegateError("MODBUS_BAD_RESPONSE", "the answer holds no word");
      word = w;
    } catch (e) {
      throw new SitegateError(
        e instanceof SitegateError ? e.code : "CONTROL_VALUE_INVALID",
        `scale factor at register ${at} could not be read: ${errorMessage(e)}; nothing written`,
        {
          transient: e instanceof SitegateError ? e.transient : false,
          cause: e,
        },
      );
    }
    known.set(at, decodeScaleFactor(word, at));
  }
  if (key) cache.set(key, known);
  return known;
}

/** Reads the registers the steps divide by (`per`), now: a failed read throws, and nothing is written. */
export async function readLive(driver: DeviceDriver, steps: readonly WriteStep[]): Promise<Map<string, number>> {
  const live = new Map<string, number>();
  for (const step of steps) {
    const per = step.per;
    if (!per || live.has(perKey(step)) || !resolve(driver, step)) continue;
    let word: number | undefined;
    try {
      [word] = await driver.bus.read(step.unit ?? driver.unit, per.table, per.address, 1, {
        priority: PRIORITY.control,
        timeoutMs: driver.timeoutMs,
        retries: 1,
      });
    } catch (e) {
      throw new SitegateError(
        e instanceof SitegateError ? e.code : "CONTROL_VALUE_INVALID",
        `${per.table} register ${per.address} could not be read: ${errorMessage(e)}; nothing written`,
        {
          transient: e instanceof SitegateError ? e.transient : false,
          cause: e,
        },
      );
    }
    if (word === undefined)
      throw new SitegateError("MODBUS_BAD_RESPONSE", `${per.table} register ${per.address}: the answer holds no word; nothing written`);
    live.set(perKey(step), (per.type === "s16" && word >= 0x8000 ? word - 0x10000 : word) * per.scale);
  }
  return live;
}

/** planWrites with the device's own scale factors and live readings: what a control action writes. */
export async function planControlWrites(driver: DeviceDriver, steps: readonly WriteStep[], params: ControlParams): Promise<Write[]> {
  const sfs = await readScaleFactors(driver, steps);
  return planWrites(driver, steps, params, sfs, await readLive(driver, steps));
}
