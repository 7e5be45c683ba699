// Packs one snapshot's samples into a compact, exact byte string: per sample a varint
// key (series id << 2 | tag) and the value as a zigzag varint integer, a short decimal
// (mantissa / 10^k), a float32 that round-trips, or a float64. Most samples take 3-5 bytes.

import { Writer } from "./delta-codec.js";
import { SitegateError } from "../errors.js";

const TAG_INT = 0;
const TAG_DEC = 1;
const TAG_F32 = 2;
const TAG_F64 = 3;

export interface PackedSample {
  series: number;
  value: number;
}

const zig = (n: number) => (n >= 0 ? n * 2 : -n * 2 - 1);
const unzig = (n: number) => (n % 2 === 0 ? n / 2 : -(n + 1) / 2);
const MAX_INT = 2 ** 51; // zigzag doubles it; stays below 2^53

function asDecimal(v: number): { k: number; m: number } | null {
  if (Object.is(v, -0)) return null; // zigzag has no negative zero
  for (let k = 1, p = 10; k <= 6; k++, p *= 10) {
    const m = Math.round(v * p);
    if (Math.abs(m) < MAX_INT && m / p === v) return { k, m };
  }
  return null;
}

export function packSamples(samples: readonly PackedSample[]): Buffer {
  const w = new Writer();
  for (const { series, value: v } of samples) {
    if (Number.isInteger(v) && Math.abs(v) < MAX_INT && !Object.is(v, -0)) {
      w.varint(series * 4 + TAG_INT);
      w.varint(zig(v));
      continue;
    }
    const d = Number.isFinite(v) ? asDecimal(v) : null;
    if (d) {
      w.varint(series * 4 + TAG_DEC);
      w.varint(d.k);
      w.varint(zig(d.m));
    } else if (Math.fround(v) === v || Number.isNaN(v)) {
      w.varint(series * 4 + TAG_F32);
      w.f32(v);
    } else {
      w.varint(series * 4 + TAG_F64);
      w.f64(v);
    }
  }
  return w.done();
}

export function unpackSamples(buf: Uint8Array): PackedSample[] {
  const out: PackedSample[] = [];
  const view = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  let i = 0;
  const varint = (): number => {
    let n = 0;
    let mul = 1;
    for (;;) {
      const b = view[i++];
      if (b === undefined) throw new SitegateError("STORAGE_CORRUPT", "truncated sample record");
      n += (b & 0x7f) * mul;
      if (b < 0x80) return n;
      mul *= 0x80;
    }
  };
  while (i < view.length) {
    const key = varint();
    const tag = key % 4;
    const series = (key - tag) / 4;
    let value: number;
    if (tag === TAG_INT) value = unzig(varint());
    else if (tag === TAG_DEC) {
      const k = varint();
      value = unzig(varint()) / 10 ** k;
    } else if (tag === TAG_F32) {
      value = view.readFloatLE(i);
      i += 4;
    } else {
      value = view.readDoubleLE(i);
      i += 8;
    }
    out.push({ series, value });
  }
  return out;
}
