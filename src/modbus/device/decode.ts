// Decoding what a poll read into canonical metrics: a point's words (a sub-device's own
// unit, or the device's), its "not available" sentinels, the sign of a magnitude from its
// direction register, its scale factor, a second magnitude subtracted. Pure: no bus here.
import { decodeRaw, isSunSpecNotImplemented, readingValue, typeRegs, type ValueType, type WordOrder } from "../codec.js";
import type { FixedProfile } from "../../profiles/schema.js";
import { isRequired } from "./unavailable.js";
import type { Block, Range, Table } from "../planner.js";
import type { Metrics } from "../../model/device.js";

export type PointClass = "fast" | "slow";

/** The register that carries the sign of a magnitude point. */
export interface Direction extends Range {
  unit?: number;
  type: ValueType;
  word_order: WordOrder;
  bit?: number;
  negative: number[];
}

/** A block read of one unit id (a sub-device's own, or the device's when absent). */
export interface UnitBlock extends Block {
  unit?: number;
}

export interface ResolvedPoint extends Range {
  metric: string;
  /** A sub-device's own unit id; absent: the device's. */
  unit?: number;
  /** Raw values that mean "not available" (whole register width, unsigned), the profile's for the point's type included. */
  na: Sentinel[];
  direction?: Direction;
  /** A second magnitude of the same type subtracted from this one (charge and discharge reported apart). */
  minus?: Range & { na: Sentinel[] };
  type: ValueType;
  word_order: WordOrder;
  scale: number;
  sf_address?: number;
  sunspec_na: boolean;
  class: PointClass;
  bitmask: boolean;
  /** The role cannot do without it (never left out as unavailable). */
  required?: boolean;
}

/** Registers read in one poll, by unit id and table. */
export type Registers = Map<string, Map<number, number>>;

export function tableKey(unit: number, table: Table): string {
  return `${unit}/${table}`;
}

/** A raw value that means "not available": the whole value as one unsigned number, or every bit set. */
export type Sentinel = number | "all_ones";

/** Whether the words, as one unsigned number (high word first after word order), are one of the sentinels. */
export function isSentinel(words: readonly number[], order: WordOrder, sentinels: readonly Sentinel[]): boolean {
  if (sentinels.length === 0) return false;
  if (sentinels.includes("all_ones") && words.every((x) => (x & 0xffff) === 0xffff)) return true;
  const w = order === "little" ? [...words].reverse() : words;
  const raw = w.reduce((acc, x) => acc * 0x10000 + (x & 0xffff), 0);
  return sentinels.includes(raw);
}

/** A profile's "not available" values by data type (`enum`: of the points that name an enum). */
export type NotAvailable = Partial<Record<ValueType | "enum", Sentinel[]>>;

/** A point's own "not available" values and its profile's for its type (and for an enum point, the enum's). */
export function sentinelsOf(own: readonly Sentinel[], byType: NotAvailable, type: ValueType, isEnum = false): Sentinel[] {
  return [...own, ...(byType[type] ?? []), ...(isEnum ? (byType.enum ?? []) : [])];
}

/** A fixed profile's points where they are read (before any relocation), each with its sentinels and whether its role requires it. */
export function resolveFixedPoints(p: FixedProfile): ResolvedPoint[] {
  return p.points.map((pt) => ({
    metric: pt.metric,
    unit: pt.unit,
    na: sentinelsOf(pt.na, p.not_available, pt.type, pt.enum !== undefined),
    direction: pt.direction && { ...pt.direction, count: typeRegs(pt.direction.type) },
    minus: pt.minus && { ...pt.minus, na: sentinelsOf(pt.minus.na, p.not_available, pt.type), count: typeRegs(pt.type, pt.length) },
    table: pt.table,
    address: pt.address,
    count: pt.table === "coil" || pt.table === "discrete" ? (pt.length ?? 1) : typeRegs(pt.type, pt.length),
    type: pt.type,
    word_order: pt.word_order,
    scale: pt.scale,
    sf_address: pt.sf_address,
    sunspec_na: pt.sunspec_na,
    class: pt.class,
    bitmask: pt.bitmask,
    required: isRequired(p.role, pt.metric, pt.required),
  }));
}

/** The words of a range of a unit's table, or null when the reads did not cover it. */
function words(data: Registers, unit: number, r: Range): number[] | null {
  const t = data.get(tableKey(unit, r.table));
  if (!t) return null;
  const out: number[] = [];
  for (let i = 0; i < r.count; i++) {
    const w = t.get(r.address + i);
    if (w === undefined) return null;
    out.push(w);
  }
  return out;
}

/** -1 while the point's direction register says the magnitude is negative, else 1; null when it was not read. */
function sign(data: Registers, pt: ResolvedPoint, unit: number): number | null {
  const d = pt.direction;
  if (!d) return 1;
  const w = words(data, d.unit ?? pt.unit ?? unit, d);
  if (!w) return null;
  let v = decodeRaw(d.type, w, d.word_order) as number;
  if (d.bit !== undefined) v = Math.floor(v / 2 ** d.bit) % 2;
  return d.negative.includes(v) ? -1 : 1;
}

/** The points `pick` chooses, decoded from the registers read (a point whose registers or scale factor were not read, or read "not available", gives no value). */
export function decodePoints(
  points: readonly ResolvedPoint[],
  pick: (pt: ResolvedPoint) => boolean,
  data: Registers,
  unit: number,
): Metrics {
  const out: Metrics = {};
  for (const pt of points) {
    if (!pick(pt)) continue;
    const ws = words(data, pt.unit ?? unit, pt);
    if (!ws) continue;
    if (pt.bitmask) {
      out[pt.metric] = ws.reduce((acc, bit, i) => acc + (bit ? 2 ** i : 0), 0);
      continue;
    }
    if (pt.type === "string") continue;
    if (pt.sunspec_na && isSunSpecNotImplemented(pt.type, ws, pt.word_order)) continue;
    if (isSentinel(ws, pt.word_order, pt.na)) continue;
    const sg = sign(data, pt, unit);
    if (sg === null) continue;
    let sf = 0;
    if (pt.sf_address !== undefined) {
      const s = data.get(tableKey(pt.unit ?? unit, "holding"))?.get(pt.sf_address);
      if (s === undefined || s === 0x8000) continue; // scale factor not implemented: no value
      sf = s >= 0x8000 ? s - 0x10000 : s;
      if (sf < -10 || sf > 10) continue;
    }
    let raw = decodeRaw(pt.type, ws, pt.word_order) as number;
    if (pt.minus) {
      const less = words(data, pt.unit ?? unit, pt.minus);
      if (!less || isSentinel(less, pt.word_order, pt.minus.na) || (pt.sunspec_na && isSunSpecNotImplemented(pt.type, less, pt.word_order)))
        continue;
      raw -= decodeRaw(pt.type, less, pt.word_order) as number;
    }
    if (!Number.isFinite(raw)) continue;
    out[pt.metric] = readingValue(raw, pt.type, sf, pt.scale * sg);
  }
  return out;
}
