import { SitegateError } from "../errors.js";
// Packs one snapshot's samples against the snapshot before it (a delta), or alone (a key
// snapshot), exactly: whatever goes in comes back bit for bit (NaN, -0 and float64 included).
//
//   header  varint: 0 = the same series as the previous snapshot, in the same order;
//           n + 1 = n samples whose series ids follow (zigzag differences, the first from 0)
//   same    a bitmap, one bit a sample (1 = changed), then the changed values
//   other   every value
//   value   varint key = first * 8 + tag, then the rest of the tag's payload:
//           INT    first = zigzag(v)
//           DEC    first = k, then zigzag(v * 10^k)               (k = 1..6 decimals)
//           F32    4 bytes; F64 8 bytes                             (first = 0)
//           DINT   first = zigzag(v - previous)                     (both integers)
//           DDEC   first = k, then zigzag((v - previous) * 10^k)    (both k-decimal)
//           SAME   v equals the previous value                      (only where no bitmap says so)
// A value that did not change costs one bit; a meter's power that moved by 5.3 W costs two bytes.

export interface PackedSample {
  series: number;
  value: number;
}

const INT = 0;
const DEC = 1;
const F32 = 2;
const F64 = 3;
const DINT = 4;
const DDEC = 5;
const SAME = 6;
/** key = first * 8 + tag stays below 2^53. */
const MAX_FIRST = 2 ** 49;

/** A growing byte buffer with varints (also sample-codec.ts's). */
export class Writer {
  buf = Buffer.allocUnsafe(256);
  len = 0;
  ensure(n: number): void {
    if (this.len + n <= this.buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.len + n));
    this.buf.copy(next, 0, 0, this.len);
    this.buf = next;
  }
  varint(n: number): void {
    this.ensure(8);
    while (n >= 0x80) {
      this.buf[this.len++] = (n % 0x80) | 0x80;
      n = Math.floor(n / 0x80);
    }
    this.buf[this.len++] = n;
  }
  byte(b: number): void {
    this.ensure(1);
    this.buf[this.len++] = b;
  }
  f32(v: number): void {
    this.ensure(4);
    this.buf.writeFloatLE(v, this.len);
    this.len += 4;
  }
  f64(v: number): void {
    this.ensure(8);
    this.buf.writeDoubleLE(v, this.len);
    this.len += 8;
  }
  done(): Buffer {
    return Buffer.from(this.buf.subarray(0, this.len));
  }
}

class Reader {
  private i = 0;
  private readonly view: Buffer;
  constructor(buf: Uint8Array) {
    this.view = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  }
  get more(): boolean {
    return this.i < this.view.length;
  }
  private need(n: number): void {
    if (this.i + n > this.view.length) throw new SitegateError("STORAGE_CORRUPT", "truncated sample record");
  }
  varint(): number {
    let n = 0;
    let mul = 1;
    for (;;) {
      this.need(1);
      const b = this.view[this.i++]!; // need(1) checked the bound
      n += (b & 0x7f) * mul;
      if (b < 0x80) return n;
      mul *= 0x80;
    }
  }
  byte(): number {
    this.need(1);
    return this.view[this.i++]!; // need(1) checked the bound
  }
  f32(): number {
    this.need(4);
    const v = this.view.readFloatLE(this.i);
    this.i += 4;
    return v;
  }
  f64(): number {
    this.need(8);
    const v = this.view.readDoubleLE(this.i);
    this.i += 8;
    return v;
  }
}

const zig = (n: number) => (n >= 0 ? n * 2 : -n * 2 - 1);
const unzig = (n: number) => (n % 2 === 0 ? n / 2 : -(n + 1) / 2);
const isInt = (v: number) => Number.isInteger(v) && Math.abs(v) < MAX_FIRST / 2 && !Object.is(v, -0);

/** The fewest decimals (1..6) that hold v exactly, with its mantissa; null if none does. */
function asDecimal(v: number): { k: number; m: number } | null {
  if (!Number.isFinite(v) || Object.is(v, -0)) return null;
  for (let k = 1, p = 10; k <= 6; k++, p *= 10) {
    const m = Math.round(v * p);
    if (Math.abs(m) < MAX_FIRST / 2 && m / p === v) return { k, m };
  }
  return null;
}

function writeValue(w: Writer, v: number, prev: number | undefined, sameAllowed: boolean): void {
  if (prev !== undefined) {
    if (sameAllowed && Object.is(v, prev)) return w.varint(SAME);
    if (isInt(v) && isInt(prev) && Math.abs(v - prev) < MAX_FIRST / 2) return w.varint(zig(v - prev) * 8 + DINT);
    const d = isInt(v) ? null : asDecimal(v);
    if (d) {
      const p = 10 ** d.k;
      const mp = Math.round(prev * p);
      // prev holds as many decimals or fewer, and the difference decodes back to v exactly
      if (Number.isFinite(prev) && Math.abs(mp) < MAX_FIRST / 2 && mp / p === prev && (mp + (d.m - mp)) / p === v) {
        w.varint(d.k * 8 + DDEC);
        return w.varint(zig(d.m - mp));
      }
    }
  }
  if (isInt(v)) return w.varint(zig(v) * 8 + INT);
  const d = asDecimal(v);
  if (d) {
    w.varint(d.k * 8 + DEC);
    return w.varint(zig(d.m));
  }
  if (Math.fround(v) === v || Number.isNaN(v)) {
    w.varint(F32);
    return w.f32(v);
  }
  w.varint(F64);
  w.f64(v);
}

function readValue(r: Reader, prev: number | undefined): number {
  const key = r.varint();
  const tag = key % 8;
  const first = (key - tag) / 8;
  const needPrev = (): number => {
    if (prev === undefined) throw new SitegateError("STORAGE_CORRUPT", "a delta sample without a previous value");
    return prev;
  };
  switch (tag) {
    case INT:
      return unzig(first);
    case DEC:
      return unzig(r.varint()) / 10 ** first;
    case F32:
      return r.f32();
    case F64:
      return r.f64();
    case DINT:
      return needPrev() + unzig(first);
    case DDEC: {
      const p = 10 ** first;
      return (Math.round(needPrev() * p) + unzig(r.varint())) / p;
    }
    case SAME:
      return needPrev();
    default:
      throw new SitegateError("STORAGE_CORRUPT", `unknown sample tag ${tag}`);
  }
}

/** Packs `samples`, against `prev` (the snapshot before it, as decoded) when given. */
export function packSnapshot(samples: readonly PackedSample[], prev: readonly PackedSample[] | null = null): Buffer {
  const w = new Writer();
  const sameSeries = prev !== null && prev.length === samples.length && samples.every((s, i) => s.series === prev[i]!.series); // same length, checked before
  if (sameSeries) {
    w.varint(0);
    const bits = Buffer.alloc(Math.ceil(samples.length / 8));
    samples.forEach((s, i) => {
      // sameSeries: prev has samples' length; bits has a bit for each
      if (!Object.is(s.value, prev[i]!.value)) bits[i >> 3]! |= 1 << (i & 7);
    });
    for (const b of bits) w.byte(b);
    samples.forEach((s, i) => {
      if (bits[i >> 3]! & (1 << (i & 7))) writeValue(w, s.value, prev[i]!.value, false);
    });
    return w.done();
  }
  w.varint(samples.length + 1);
  let last = 0;
  for (const s of samples) {
    w.varint(zig(s.series - last));
    last = s.series;
  }
  const before = prev ? new Map(prev.map((s) => [s.series, s.value])) : null;
  for (const s of samples) writeValue(w, s.value, before?.get(s.series), true);
  return w.done();
}

/** Unpacks what packSnapshot made; `prev` must be what it was packed against. */
export function unpackSnapshot(buf: Uint8Array, prev: readonly PackedSample[] | null = null): PackedSample[] {
  const r = new Reader(buf);
  const header = r.varint();
  let out: PackedSample[];
  if (header === 0) {
    if (!prev) throw new SitegateError("STORAGE_CORRUPT", "a delta snapshot without the snapshot before it");
    const bits: number[] = [];
    for (let i = 0; i < Math.ceil(prev.length / 8); i++) bits.push(r.byte());
    out = prev.map((p, i) => ({ series: p.series, value: bits[i >> 3]! & (1 << (i & 7)) ? readValue(r, p.value) : p.value }));
  } else {
    const series: number[] = [];
    let last = 0;
    for (let i = 0; i < header - 1; i++) series.push((last += unzig(r.varint())));
    const before = prev ? new Map(prev.map((s) => [s.series, s.value])) : null;
    out = series.map((id) => ({ series: id, value: readValue(r, before?.get(id)) }));
  }
  if (r.more) throw new SitegateError("STORAGE_CORRUPT", "trailing bytes after a sample record");
  return out;
}
