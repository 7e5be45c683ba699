import { SitegateError } from "../errors.js";
// Register values to numbers: integer and float types of 16 to 64 bits, strings, word
// order, constant scale, SunSpec scale factors, and SunSpec "not implemented" values
// (which give no value rather than a wrong number).

export type ValueType =
  | "u16"
  | "s16"
  | "u32"
  | "s32"
  | "u64"
  | "s64"
  | "f32"
  | "f64"
  | "string"
  | "bitfield16"
  | "bitfield32"
  | "acc32"
  | "acc64"
  | "sunssf";
export type WordOrder = "big" | "little";

export const TYPE_REGS: Record<Exclude<ValueType, "string">, number> = {
  u16: 1,
  s16: 1,
  bitfield16: 1,
  sunssf: 1,
  u32: 2,
  s32: 2,
  f32: 2,
  bitfield32: 2,
  acc32: 2,
  u64: 4,
  s64: 4,
  f64: 4,
  acc64: 4,
};

export function typeRegs(type: ValueType, length?: number): number {
  return type === "string" ? (length ?? 1) : TYPE_REGS[type];
}

/** Puts the words in big-endian (high word first) order. */
function ordered(words: readonly number[], order: WordOrder): number[] {
  return order === "little" ? [...words].reverse() : [...words];
}

function toBuffer(words: readonly number[]): Buffer {
  const b = Buffer.alloc(words.length * 2);
  words.forEach((w, i) => b.writeUInt16BE(w & 0xffff, i * 2));
  return b;
}

/** The raw number (or string) the registers hold, before scaling. */
export function decodeRaw(type: ValueType, words: readonly number[], order: WordOrder = "big"): number | string {
  const w = type === "string" ? [...words] : ordered(words, order);
  const b = toBuffer(w);
  switch (type) {
    case "u16":
    case "bitfield16":
      return b.readUInt16BE(0);
    case "s16":
    case "sunssf":
      return b.readInt16BE(0);
    case "u32":
    case "bitfield32":
    case "acc32":
      return b.readUInt32BE(0);
    case "s32":
      return b.readInt32BE(0);
    case "u64":
    case "acc64":
      return Number(b.readBigUInt64BE(0));
    case "s64":
      return Number(b.readBigInt64BE(0));
    case "f32":
      return b.readFloatBE(0);
    case "f64":
      return b.readDoubleBE(0);
    case "string":
      return b.toString("latin1").replace(/\0+$/, "").replace(/\0/g, "").trim();
  }
}

/** SunSpec's "not implemented" sentinel for a type (accumulators: 0; strings: all NUL). */
export function isSunSpecNotImplemented(type: ValueType, words: readonly number[], order: WordOrder = "big"): boolean {
  const w = ordered(words, order);
  switch (type) {
    case "s16":
    case "sunssf":
      return w[0] === 0x8000;
    case "u16":
    case "bitfield16":
      return w[0] === 0xffff;
    case "s32":
      return w[0] === 0x8000 && w[1] === 0;
    case "u32":
    case "bitfield32":
      return w[0] === 0xffff && w[1] === 0xffff;
    case "acc32":
      return w[0] === 0 && w[1] === 0;
    case "u64":
    case "acc64":
      return w.every((x) => (type === "acc64" ? x === 0 : x === 0xffff));
    case "s64":
      return w[0] === 0x8000 && w.slice(1).every((x) => x === 0);
    case "f32":
      return Number.isNaN(toBuffer(w).readFloatBE(0));
    case "f64":
      return Number.isNaN(toBuffer(w).readDoubleBE(0));
    case "string":
      return words.every((x) => x === 0);
  }
}

/**
 * raw x 10^sf x scale, computed so that decimal results are the nearest double
 * (2297 with sf -1 gives 229.7, not 229.70000000000002).
 */
export function scaleValue(raw: number, sf = 0, scale = 1): number {
  let v = sf < 0 ? raw / 10 ** -sf : sf > 0 ? raw * 10 ** sf : raw;
  if (scale !== 1) v = Number.isInteger(1 / scale) ? v / (1 / scale) : v * scale;
  return v;
}

/** Significant decimal digits a float register carries (float32 has 24 bits: ~7 digits; float64 ~15). */
export const FLOAT_DIGITS = { f32: 7, f64: 15 } as const;

/** Decimal places of a constant scale (0.01: 2, 0.5: 1, 1000: 0), or null when it has no short decimal form (1/3). */
function scaleDecimals(scale: number): number | null {
  for (let k = 0; k <= 15; k++) {
    const m = scale * 10 ** k;
    if (Math.abs(m - Math.round(m)) <= Math.abs(m) * 1e-12) return k;
  }
  return null;
}

/** Rounds to d decimal places; a value whose double resolution is coarser than that is returned as it is. */
function toDecimals(v: number, d: number): number {
  const p = 10 ** d;
  const m = v * p;
  if (!(Math.abs(m) < 2 ** 53)) return v;
  // An integer over an exact power of ten: the nearest double to the decimal.
  return Math.round(m) / p;
}

/**
 * A reading at the precision its register carries, so that the store, the status page,
 * the partner and the fleet all see the value the device meant, not binary noise:
 * - float32: 7 significant digits (-1959.853759765625 -> -1959.854; 0.1f -> 0.1); float64: 15;
 *   after the constant scale (kWh x 1000 keeps the float's digits);
 * - integers: the decimals of 10^sf x scale (1234 with sf -2 -> 12.34, never 12.340000000000001).
 * NaN and +-Infinity pass through unchanged (the driver drops them before this); -0 becomes 0.
 */
export function roundReading(value: number, type: ValueType, sf = 0, scale = 1): number {
  if (!Number.isFinite(value)) return value;
  let v: number;
  if (type === "f32" || type === "f64") v = Number(value.toPrecision(FLOAT_DIGITS[type]));
  else {
    const k = scale === 1 ? 0 : scaleDecimals(scale);
    v = k === null ? Number(value.toPrecision(FLOAT_DIGITS.f64)) : toDecimals(value, Math.max(0, k - sf));
  }
  return v === 0 ? 0 : v;
}

/** The engineering value of a decoded register value: scaled (scaleValue), then rounded to what the register carries (roundReading). */
export function readingValue(raw: number, type: ValueType, sf = 0, scale = 1): number {
  return roundReading(scaleValue(raw, sf, scale), type, sf, scale);
}

/** Encodes a number into registers for a write. Throws on values the type cannot hold. */
export function encodeValue(type: ValueType, value: number, order: WordOrder = "big"): number[] {
  const b = Buffer.alloc(typeRegs(type) * 2);
  const int = (min: number, max: number) => {
    if (!Number.isInteger(value) || value < min || value > max)
      throw new SitegateError("CONTROL_VALUE_INVALID", `${value} does not fit ${type}`);
  };
  switch (type) {
    case "u16":
    case "bitfield16":
      int(0, 0xffff);
      b.writeUInt16BE(value);
      break;
    case "s16":
    case "sunssf":
      int(-0x8000, 0x7fff);
      b.writeInt16BE(value);
      break;
    case "u32":
    case "bitfield32":
    case "acc32":
      int(0, 0xffffffff);
      b.writeUInt32BE(value);
      break;
    case "s32":
      int(-0x80000000, 0x7fffffff);
      b.writeInt32BE(value);
      break;
    case "f32":
      b.writeFloatBE(value);
      break;
    case "f64":
      b.writeDoubleBE(value);
      break;
    case "u64":
    case "acc64":
      int(0, Number.MAX_SAFE_INTEGER);
      b.writeBigUInt64BE(BigInt(value));
      break;
    case "s64":
      int(Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER);
      b.writeBigInt64BE(BigInt(value));
      break;
    case "string":
      throw new SitegateError("CONTROL_VALUE_INVALID", "strings are not written");
  }
  const words = Array.from({ length: b.length / 2 }, (_, i) => b.readUInt16BE(i * 2));
  return ordered(words, order);
}
