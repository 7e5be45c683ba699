import { SitegateError } from "../errors.js";
// The block planner: merges the registers a poll needs into as few reads as possible.
// A gap between two ranges is read through when the unneeded registers cost less wire
// time than another request would; never across ranges the profile marks unreadable,
// never beyond the device's per-read limit.

export type Table = "holding" | "input" | "coil" | "discrete";

export interface Range {
  table: Table;
  address: number;
  count: number;
}

export interface Block extends Range {
  /** Indexes into the ranges passed in that this block covers. */
  members: number[];
}

export interface PlanOptions {
  /** Registers per read (125 at most; some devices accept fewer); coils: 2000. */
  maxRegs: number;
  maxCoils?: number;
  /** Unneeded registers worth reading to save one request (derived from the transport's overhead). */
  maxGap: number;
  unreadable?: Range[];
}

/**
 * Registers' worth of wire time one extra RTU request costs: frame bytes, silences,
 * turnaround. Reading through a gap of g registers costs 2g characters, so a gap up to
 * half the request's cost in characters is cheaper read than asked for separately.
 */
export function rtuGapRegs(baud: number, bitsPerChar = 10, turnaroundMs = 5): number {
  const charMs = (bitsPerChar * 1000) / baud;
  // The silence is 3.5 characters, but a fixed 1.75 ms above 19200 baud (as the bus keeps it).
  const silenceChars = baud > 19200 ? 1.75 / charMs : 3.5;
  // request 8 bytes + response header and CRC 5 bytes + two silences, plus turnaround.
  const chars = 8 + 5 + 2 * silenceChars + turnaroundMs / charMs;
  return Math.floor(chars / 2);
}

/** Over TCP a request costs a round trip; reading 64 spare registers costs less. */
export const TCP_GAP_REGS = 64;

function crossesUnreadable(table: Table, from: number, to: number, unreadable: Range[]): boolean {
  return unreadable.some((u) => u.table === table && u.address < to && u.address + u.count > from);
}

export function planBlocks(ranges: readonly Range[], opts: PlanOptions): Block[] {
  const unreadable = opts.unreadable ?? [];
  const order = ranges
    .map((r, i) => ({ r, i }))
    .sort((a, b) => (a.r.table === b.r.table ? a.r.address - b.r.address : a.r.table < b.r.table ? -1 : 1));
  const blocks: Block[] = [];
  let cur: Block | null = null;
  for (const { r, i } of order) {
    const bits = r.table === "coil" || r.table === "discrete";
    const limit = bits ? (opts.maxCoils ?? 2000) : opts.maxRegs;
    if (r.count > limit) throw new SitegateError("PROFILE_INVALID", `a point of ${r.count} registers exceeds the read limit ${limit}`);
    if (cur && cur.table === r.table) {
      const end = Math.max(cur.address + cur.count, r.address + r.count);
      const gap = r.address - (cur.address + cur.count);
      const fits = end - cur.address <= limit;
      const cheap = gap <= (bits ? limit : opts.maxGap);
      if (fits && cheap && (gap <= 0 || !crossesUnreadable(r.table, cur.address + cur.count, r.address, unreadable))) {
        cur.count = end - cur.address;
        cur.members.push(i);
        continue;
      }
    }
    cur = { table: r.table, address: r.address, count: r.count, members: [i] };
    blocks.push(cur);
  }
  return blocks;
}
