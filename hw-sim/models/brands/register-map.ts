// A register table as a manufacturer's document lists it: each entry an address, a
// size, an encoding (16/32/64-bit, float, string, the brand's word order) and a value
// computed on read from the device's state. Writes are validated whole before any is
// applied, so a refused write (exception 3) changes nothing, as on the real devices.
import { ModbusException, ILLEGAL_ADDRESS, ILLEGAL_VALUE } from "../../modbus-pdu.js";

export type WordOrder = "hi-lo" | "lo-hi";

export interface RegDef {
  /** Registers the value spans. */
  size: number;
  read(): number[];
  /** Present = writable: gets the raw words; throws ModbusException(ILLEGAL_VALUE) to refuse. */
  write?(words: number[]): () => void;
}

/** Refuses a value outside min..max with ILLEGAL DATA VALUE, as the documents' ranges say. */
export function check(ok: boolean): void {
  if (!ok) throw new ModbusException(ILLEGAL_VALUE);
}

export function clampInt(x: number, min: number, max: number): number {
  return Math.max(min, Math.min(max, Math.round(x)));
}

function split32(v: number, order: WordOrder): number[] {
  const u = v >>> 0;
  const hi = (u >>> 16) & 0xffff;
  const lo = u & 0xffff;
  return order === "hi-lo" ? [hi, lo] : [lo, hi];
}

/** The two words of a 32-bit value; fewer is a refused value, not a NaN. */
function pair(words: number[]): [number, number] {
  const [a, b] = words;
  if (a === undefined || b === undefined) throw new ModbusException(ILLEGAL_VALUE);
  return [a, b];
}

function join32(words: number[], order: WordOrder): number {
  const [a, b] = pair(words);
  return order === "hi-lo" ? a * 0x10000 + b : b * 0x10000 + a;
}

export const enc = {
  u16: (v: number) => [clampInt(v, 0, 0xffff)],
  s16: (v: number) => [clampInt(v, -0x8000, 0x7fff) & 0xffff],
  u32: (v: number, o: WordOrder) => split32(clampInt(v, 0, 0xffffffff), o),
  s32: (v: number, o: WordOrder) => split32(clampInt(v, -0x80000000, 0x7fffffff), o),
  u64: (v: number, o: WordOrder) => {
    const n = BigInt(Math.max(0, Math.round(v)));
    const w = [Number((n >> 48n) & 0xffffn), Number((n >> 32n) & 0xffffn), Number((n >> 16n) & 0xffffn), Number(n & 0xffffn)];
    return o === "hi-lo" ? w : w.reverse();
  },
  f32: (v: number, o: WordOrder) => {
    const b = Buffer.alloc(4);
    b.writeFloatBE(v, 0);
    const [hi, lo] = [b.readUInt16BE(0), b.readUInt16BE(2)];
    return o === "hi-lo" ? [hi, lo] : [lo, hi];
  },
  /** ASCII, two characters a register, first character in the high byte, NUL padded. */
  str: (s: string, regs: number) => {
    const b = Buffer.alloc(regs * 2);
    b.write(s.slice(0, regs * 2), "latin1");
    return Array.from({ length: regs }, (_, i) => b.readUInt16BE(i * 2));
  },
};

export const dec = {
  s16: (w: number) => (w >= 0x8000 ? w - 0x10000 : w),
  u32: (w: number[], o: WordOrder) => join32(w, o),
  s32: (w: number[], o: WordOrder) => {
    const u = join32(w, o);
    return u >= 0x80000000 ? u - 0x100000000 : u;
  },
  f32: (w: number[], o: WordOrder) => {
    const b = Buffer.alloc(4);
    const [x, y] = pair(w);
    const [hi, lo] = o === "hi-lo" ? [x, y] : [y, x];
    b.writeUInt16BE(hi, 0);
    b.writeUInt16BE(lo, 2);
    return b.readFloatBE(0);
  },
};

/** Shorthands for the common entries. */
export const reg = {
  fixed: (words: number[]): RegDef => ({ size: words.length, read: () => words }),
  ro: (size: number, read: () => number[]): RegDef => ({ size, read }),
  rw: (size: number, read: () => number[], write: (words: number[]) => () => void): RegDef => ({ size, read, write }),
  /** One writable register: `write` gets its word (the map hands every entry its size in words). */
  rw1: (read: () => number[], write: (word: number) => () => void): RegDef => ({
    size: 1,
    read,
    write: ([w]) => {
      if (w === undefined) throw new ModbusException(ILLEGAL_VALUE);
      return write(w);
    },
  }),
};

/** How a value goes into its registers and comes back out of them. */
export interface Codec {
  size: number;
  enc(v: number): number[];
  dec(words: number[]): number;
}

function word(words: number[]): number {
  const [w] = words;
  if (w === undefined) throw new ModbusException(ILLEGAL_VALUE);
  return w;
}

export const codec = {
  u16: { size: 1, enc: enc.u16, dec: word } as Codec,
  s16: { size: 1, enc: enc.s16, dec: (w: number[]) => dec.s16(word(w)) } as Codec,
  u32: (o: WordOrder): Codec => ({ size: 2, enc: (v) => enc.u32(v, o), dec: (w) => dec.u32(w, o) }),
  s32: (o: WordOrder): Codec => ({ size: 2, enc: (v) => enc.s32(v, o), dec: (w) => dec.s32(w, o) }),
  f32: (o: WordOrder): Codec => ({ size: 2, enc: (v) => enc.f32(v, o), dec: (w) => dec.f32(w, o) }),
};

/**
 * A writable setting of one codec, the brand models' read-write glue: it reads `get()`; a
 * write is decoded, refused with ILLEGAL DATA VALUE unless a finite value `ok` accepts, and
 * applied by `set` only once the whole write has been validated.
 */
export function setting(c: Codec) {
  return (get: () => number, set: (v: number) => void, ok: (v: number) => boolean): RegDef => ({
    size: c.size,
    read: () => c.enc(get()),
    write: (words) => {
      const v = c.dec(words);
      check(Number.isFinite(v) && ok(v));
      return () => set(v);
    },
  });
}

export interface MapOptions {
  /** A read must start at an entry's first register and end at an entry's end (SMA refuses half a 32-bit value). */
  wholeReads?: boolean;
  /**
   * The document's register blocks, [first, last] inclusive: a reserved register inside
   * one reads `fill` (0 unless given), as these devices answer a block read whole;
   * an address outside every block answers exception 2. Absent: every undefined
   * register answers exception 2.
   */
  blocks?: Array<[number, number]>;
  fill?: number;
}

/** One table (holding or input) of a device. */
export class RegisterMap {
  private readonly at = new Map<number, { start: number; def: RegDef }>();

  constructor(
    entries: Array<[number, RegDef]>,
    private readonly opts: MapOptions = {},
  ) {
    for (const [start, def] of entries) {
      for (let i = 0; i < def.size; i++) {
        if (this.at.has(start + i)) throw new Error(`register ${start + i} is defined twice`);
        this.at.set(start + i, { start, def });
      }
    }
  }

  has(address: number): boolean {
    return this.at.has(address);
  }

  private reserved(a: number): boolean {
    return (this.opts.blocks ?? []).some(([first, last]) => a >= first && a <= last);
  }

  read(address: number, count: number): number[] {
    const out: number[] = [];
    let a = address;
    while (a < address + count) {
      const e = this.at.get(a);
      if (!e && this.reserved(a)) {
        out.push(this.opts.fill ?? 0);
        a++;
        continue;
      }
      if (!e) throw new ModbusException(ILLEGAL_ADDRESS);
      if (this.opts.wholeReads && (e.start !== a || a + e.def.size > address + count)) throw new ModbusException(ILLEGAL_ADDRESS);
      const words = e.def.read();
      for (let i = a - e.start; i < e.def.size && a < address + count; i++, a++) out.push((words[i] ?? 0) & 0xffff); // a model that reads short reads 0
    }
    return out;
  }

  /** Whole entries only; every entry validated before any is applied. */
  write(address: number, values: number[]): void {
    const apply: Array<() => void> = [];
    let i = 0;
    while (i < values.length) {
      const e = this.at.get(address + i);
      if (!e || e.start !== address + i || !e.def.write || i + e.def.size > values.length) throw new ModbusException(ILLEGAL_ADDRESS);
      apply.push(e.def.write(values.slice(i, i + e.def.size)));
      i += e.def.size;
    }
    for (const f of apply) f();
  }
}
