// A SunSpec register space built from model definitions: "SunS" at the base, each model
// as (id, length, points), the end model 0xFFFF. Point values are computed on read from
// the device's state, so a read always sees the present physics.
import { ModbusException, ILLEGAL_ADDRESS, ILLEGAL_VALUE } from "../modbus-pdu.js";

export type PointType = "uint16" | "int16" | "acc32" | "uint32" | "string" | "sunssf" | "enum16" | "bitfield16" | "bitfield32" | "pad";

export interface PointDef {
  name: string;
  type: PointType;
  /** Registers; 1 for 16-bit types, 2 for 32-bit, N for strings. */
  size?: number;
  /** Scale factor exponent for scaled points (the matching *_SF point must hold the same). */
  sf?: number;
  /** Physical value (scaled by sf on encode); a string for strings; null = not implemented. */
  get?: () => number | string | null;
  /** Present = writable; receives the raw register value(s) decoded to a number. Throw ModbusException(3) for bad values. */
  set?: (raw: number) => void;
}

export interface ModelDef {
  id: number;
  /** L from the standard; the points must cover exactly L registers after the header. */
  length: number;
  points: PointDef[];
}

interface Slot {
  point: PointDef | null; // null = header/marker word with a fixed value
  fixed: number;
  word: number; // index of this register within the point
  start: number; // address of the point's first register
}

const SIZE: Record<PointType, number> = {
  uint16: 1,
  int16: 1,
  acc32: 2,
  uint32: 2,
  string: 0,
  sunssf: 1,
  enum16: 1,
  bitfield16: 1,
  bitfield32: 2,
  pad: 1,
};

function notImplemented(type: PointType): number {
  switch (type) {
    case "int16":
    case "sunssf":
    case "pad":
      return 0x8000;
    case "uint32":
    case "bitfield32":
      return 0xffffffff;
    case "acc32":
      return 0;
    default:
      return 0xffff;
  }
}

export class SunSpecImage {
  private readonly slots = new Map<number, Slot>();
  readonly end: number;

  constructor(
    readonly base: number,
    models: ModelDef[],
  ) {
    let a = base;
    const fixed = (v: number) => this.slots.set(a++, { point: null, fixed: v, word: 0, start: a - 1 });
    fixed(0x5375);
    fixed(0x6e53);
    for (const m of models) {
      fixed(m.id);
      fixed(m.length);
      let used = 0;
      for (const p of m.points) {
        const size = p.size ?? SIZE[p.type];
        for (let w = 0; w < size; w++) this.slots.set(a + w, { point: p, fixed: 0, word: w, start: a });
        a += size;
        used += size;
      }
      if (used !== m.length) throw new Error(`SunSpec model ${m.id}: points cover ${used} registers, L is ${m.length}`);
    }
    fixed(0xffff);
    fixed(0);
    this.end = a;
  }

  private encode(p: PointDef): number[] {
    const size = p.size ?? SIZE[p.type];
    const v = p.get ? p.get() : null;
    if (p.type === "string") {
      const out = new Array<number>(size).fill(0);
      if (typeof v === "string") {
        const b = Buffer.alloc(size * 2);
        b.write(v.slice(0, size * 2), "latin1");
        for (let i = 0; i < size; i++) out[i] = b.readUInt16BE(i * 2);
      }
      return out;
    }
    let raw: number;
    if (v === null || typeof v !== "number" || !Number.isFinite(v)) raw = notImplemented(p.type);
    else if (p.type === "sunssf") raw = v & 0xffff;
    else {
      raw = Math.round(v / 10 ** (p.sf ?? 0));
      if (p.type === "int16") raw = Math.max(-32767, Math.min(32767, raw)) & 0xffff;
      else if (p.type === "acc32" || p.type === "uint32" || p.type === "bitfield32") raw = (raw >>> 0) % 0x100000000;
      else raw = Math.max(0, Math.min(0xfffe, raw));
    }
    return size === 2 ? [(raw >>> 16) & 0xffff, raw & 0xffff] : [raw & 0xffff];
  }

  read(address: number, count: number): number[] {
    const out: number[] = [];
    let cache: { p: PointDef; words: number[] } | null = null;
    for (let a = address; a < address + count; a++) {
      const s = this.slots.get(a);
      if (!s) throw new ModbusException(ILLEGAL_ADDRESS);
      if (!s.point) {
        out.push(s.fixed);
        continue;
      }
      if (!cache || cache.p !== s.point) cache = { p: s.point, words: this.encode(s.point) };
      out.push(cache.words[s.word] ?? 0);
    }
    return out;
  }

  /** Writes must start at a point's first register and cover whole points; all-or-nothing. */
  write(address: number, values: number[]): void {
    const plan: Array<{ p: PointDef; raw: number }> = [];
    let i = 0;
    while (i < values.length) {
      const s = this.slots.get(address + i);
      if (!s || !s.point || !s.point.set || s.start !== address + i) throw new ModbusException(ILLEGAL_ADDRESS);
      const size = s.point.size ?? SIZE[s.point.type];
      if (i + size > values.length) throw new ModbusException(ILLEGAL_ADDRESS);
      const [w0 = 0, w1 = 0] = values.slice(i, i + size); // both there: checked just above
      let raw = size === 2 ? w0 * 0x10000 + w1 : w0;
      if (s.point.type === "int16" && raw >= 0x8000) raw -= 0x10000;
      plan.push({ p: s.point, raw });
      i += size;
    }
    // Validate everything before applying anything: a rejected write changes nothing.
    for (const { p, raw } of plan) {
      if (p.type === "enum16" && raw === 0xffff) throw new ModbusException(ILLEGAL_VALUE);
    }
    for (const { p, raw } of plan) p.set!(raw);
  }
}

/** Common model 1 (L = 66). */
export function commonModel(mn: string, md: string, vr: string, sn: string): ModelDef {
  return {
    id: 1,
    length: 66,
    points: [
      { name: "Mn", type: "string", size: 16, get: () => mn },
      { name: "Md", type: "string", size: 16, get: () => md },
      { name: "Opt", type: "string", size: 8, get: () => null },
      { name: "Vr", type: "string", size: 8, get: () => vr },
      { name: "SN", type: "string", size: 16, get: () => sn },
      { name: "DA", type: "uint16", get: () => null },
      { name: "Pad", type: "pad" },
    ],
  };
}

export function checkRange(raw: number, min: number, max: number): void {
  if (raw < min || raw > max) throw new ModbusException(ILLEGAL_VALUE);
}
