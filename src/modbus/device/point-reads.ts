// A poll's block reads when some registers are missing. A block that answers exception 2,
// or stays silent while another block of the device answers, is read again point by point
// (each point's own registers: value, scale factor, direction, minus): a point that still
// fails is marked unavailable and the rest decode. A required point that fails fails the
// read; a device of which no block answers is offline, as before.
// The blocks that hold a required point are read first: their silence is the device's (the
// device cannot be online without them), so an absent device costs one timeout, and a
// silent block of optional points fails nothing wherever the plan puts it.
import type { Range } from "../planner.js";
import { tableKey, type Registers, type ResolvedPoint, type UnitBlock } from "./decode.js";
import { isMissing, isSilent, type Unavailable } from "./unavailable.js";

/** Registers of one unit id (a sub-device's own, or the device's when absent). */
export type UnitRange = Range & { unit?: number };

/** Reads one block (a sub-device's own unit, or the device's) with this many retries. */
export type ReadBlock = (b: UnitRange, retries: number) => Promise<number[]>;

/** The registers a point reads: its value, its scale factor, its direction, its minus. */
export function pointRanges(pt: ResolvedPoint): UnitRange[] {
  const out: UnitRange[] = [{ table: pt.table, address: pt.address, count: pt.count, unit: pt.unit }];
  if (pt.sf_address !== undefined) out.push({ table: "holding", address: pt.sf_address, count: 1, unit: pt.unit });
  if (pt.direction) out.push({ ...pt.direction, unit: pt.direction.unit ?? pt.unit });
  if (pt.minus) out.push({ table: pt.minus.table, address: pt.minus.address, count: pt.minus.count, unit: pt.unit });
  return out;
}

function overlaps(a: UnitRange, b: UnitRange, unit: number): boolean {
  return (a.unit ?? unit) === (b.unit ?? unit) && a.table === b.table && a.address < b.address + b.count && b.address < a.address + a.count;
}

function store(data: Registers, unit: number, b: UnitRange, words: readonly number[]): void {
  const key = tableKey(b.unit ?? unit, b.table);
  let t = data.get(key);
  if (!t) data.set(key, (t = new Map()));
  for (let i = 0; i < words.length; i++) t.set(b.address + i, words[i]!); // i runs over words' own indices
}

export interface PointReads {
  blocks: readonly UnitBlock[];
  /** The points this read decodes (already without the skipped unavailable ones). */
  points: readonly ResolvedPoint[];
  unit: number;
  read: ReadBlock;
  retries: number;
  unavailable: Unavailable;
}

/** Reads the blocks; returns the registers read, with missing optional points marked unavailable. */
export async function readPoints(r: PointReads): Promise<Registers> {
  const data: Registers = new Map();
  const failed: { block: UnitBlock; error: unknown }[] = [];
  let answered = 0;
  let lastOk: UnitBlock | undefined;
  let silentSinceOk = false; // a block went silent after the last block that answered
  for (const b of requiredFirst(r)) {
    try {
      store(data, r.unit, b, await r.read(b, r.retries));
      answered++;
      lastOk = b;
      silentSinceOk = false;
    } catch (e) {
      if (!isMissing(e)) throw e;
      // A device that does not answer costs one timeout, not one per block: silence before
      // anything answered is the device's when the block holds a required point, or when a
      // second block is silent too (a silent first block of optional points is one block's).
      if (isSilent(e) && answered === 0 && (holdsRequired(r, b) || failed.some((f) => isSilent(f.error))))
        throw failed.find((f) => isSilent(f.error))?.error ?? e;
      failed.push({ block: b, error: e });
      if (isSilent(e)) silentSinceOk = true;
    }
  }
  // No block answered: the device's fault (it answers exception 2 to everything), not a point's.
  if (failed.length > 0 && answered === 0) throw failed[0]!.error;
  // A silent block after the last that answered: the device may have gone quiet since. One
  // read of a block that answered tells, before each of the silent block's points costs a timeout.
  if (silentSinceOk && lastOk) {
    try {
      await r.read(lastOk, 0);
    } catch {
      throw failed.find((f) => isSilent(f.error))!.error;
    }
  }
  const missing: { metric: string; error: unknown }[] = [];
  for (const f of failed) await readApart(r, f.block, data, missing);
  // Marked only once the read stands: a required point that failed leaves the others as they were.
  for (const m of missing) r.unavailable.mark(m.metric, m.error);
  for (const pt of r.points) if (r.unavailable.has(pt.metric) && covered(data, r.unit, pt)) r.unavailable.clear(pt.metric);
  return data;
}

/** Whether the block holds (part of) a required point's registers. */
function holdsRequired(r: PointReads, b: UnitRange): boolean {
  return r.points.some((pt) => pt.required && pointRanges(pt).some((x) => overlaps(x, b, r.unit)));
}

/** The blocks in plan order, those that hold a required point first. */
function requiredFirst(r: PointReads): UnitBlock[] {
  const first = r.blocks.filter((b) => holdsRequired(r, b));
  return [...first, ...r.blocks.filter((b) => !first.includes(b))];
}

/** The points of a failed block, read one by one. */
async function readApart(r: PointReads, block: UnitRange, data: Registers, missing: { metric: string; error: unknown }[]): Promise<void> {
  for (const pt of r.points) {
    const ranges = pointRanges(pt);
    if (!ranges.some((x) => overlaps(x, block, r.unit))) continue;
    try {
      for (const x of ranges) if (!covered(data, r.unit, x)) store(data, r.unit, x, await r.read(x, 0));
    } catch (e) {
      if (pt.required || !isMissing(e)) throw e;
      missing.push({ metric: pt.metric, error: e });
    }
  }
}

function covered(data: Registers, unit: number, x: UnitRange): boolean {
  const t = data.get(tableKey(x.unit ?? unit, x.table));
  if (!t) return false;
  for (let i = 0; i < x.count; i++) if (!t.has(x.address + i)) return false;
  return true;
}
