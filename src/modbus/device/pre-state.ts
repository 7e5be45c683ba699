// A Modbus device's pre-event state for the dispatch ledger: the raw values of every
// register and coil an action touches, read before the first write, in the order read
// (RawWrite[] as JSON: the form the ledger has always stored, so a row written by an
// earlier release still restores). Only what the state already held lacks is read; a
// write-only register takes the profile's `restore` words instead of a read. A setting
// the device keeps in flash is marked so, and its write-back skips what already holds.
import type { PreState } from "../../model/device.js";
import { writeLength, type RawWrite } from "./raw-write.js";

export type CellRead = (table: "holding" | "coil", address: number, count: number, unit?: number) => Promise<number[]>;

function cells(w: RawWrite): string[] {
  const unit = w.unit === undefined ? "" : `${w.unit}/`;
  return Array.from({ length: writeLength(w) }, (_, i) => `${unit}${w.table}:${w.address + i}`);
}

function fromWords(
  table: "holding" | "coil",
  address: number,
  values: number[],
  unit?: number,
  writeOnly = false,
  flash = false,
): RawWrite {
  const u = { ...(unit === undefined ? {} : { unit }), ...(writeOnly ? { restore: values } : {}), ...(flash ? { flash: true } : {}) };
  return table === "coil"
    ? { table, address, ...u, words: [], coils: values.map((v) => v !== 0) }
    : { table, address, ...u, words: values, coils: [] };
}

/** The pre-state `held` (a Modbus device's own, or none) as raw writes; anything else is not this family's and counts as none. */
export function asRawWrites(held: unknown): RawWrite[] {
  return Array.isArray(held) ? (held as RawWrite[]) : [];
}

/** `held` extended by the cells of `touched` it lacks, read (or, write-only, taken from the step's restore words). */
export async function capturePre(touched: readonly RawWrite[], held: readonly RawWrite[], read: CellRead): Promise<RawWrite[]> {
  const pre = [...held];
  const known = new Set(pre.flatMap(cells));
  for (const w of touched) {
    const cs = cells(w);
    if (cs.every((c) => known.has(c))) continue;
    if (w.restore) {
      // The device will not tell: the profile says what puts this register back.
      pre.push(fromWords(w.table, w.address, w.restore, w.unit, true));
    } else if (cs.every((c) => !known.has(c))) {
      pre.push(fromWords(w.table, w.address, await read(w.table, w.address, writeLength(w), w.unit), w.unit, false, w.flash));
    } else {
      for (const [i, c] of cs.entries()) {
        if (known.has(c)) continue;
        pre.push(fromWords(w.table, w.address + i, await read(w.table, w.address + i, 1, w.unit), w.unit, false, w.flash));
      }
    }
    for (const c of cs) known.add(c);
  }
  return pre;
}

/** Reads the registers and coils of `pre` back: undefined when they hold those values, else what differs. */
export async function verifyPre(pre: readonly RawWrite[], read: CellRead): Promise<string | undefined> {
  const diffs: string[] = [];
  for (const w of pre) {
    if (w.restore) continue; // write-only: it cannot be read back
    const now = await read(w.table, w.address, writeLength(w), w.unit);
    const want = w.table === "coil" ? w.coils.map((c) => (c ? 1 : 0)) : w.words;
    want.forEach((v, i) => {
      const got = w.table === "coil" ? (now[i] ? 1 : 0) : now[i];
      if (got !== v) diffs.push(`${w.table} ${w.address + i} reads ${got}, was ${v} before`);
    });
  }
  return diffs.length ? diffs.join("; ") : undefined;
}

/** The entries of `pre` that hold a value of a cell `written` changed: what puts those writes back. */
export function preOf(written: readonly RawWrite[], pre: readonly RawWrite[]): RawWrite[] {
  const touched = new Set(written.flatMap(cells));
  return pre.filter((w) => cells(w).some((c) => touched.has(c)));
}

/**
 * A ledger row an earlier release wrote for a one-output device declared in the config (a
 * Zigbee plug or thermostat, a GPIO line): it held the register form those devices had
 * then, coil 0 their on/off and holding 0 their heating setpoint in 0.1 °C. What it holds,
 * in their own form; anything else holds nothing of theirs.
 */
export function declaredFromRegisters(pre: PreState): { on?: boolean; setpoint_c?: number } {
  const out: { on?: boolean; setpoint_c?: number } = {};
  for (const w of asRawWrites(pre) as Array<Partial<RawWrite>>) {
    if (w.address !== 0) continue;
    if (w.table === "coil" && typeof w.coils?.[0] === "boolean") out.on = w.coils[0];
    if (w.table === "holding" && typeof w.words?.[0] === "number") out.setpoint_c = w.words[0] / 10;
  }
  return out;
}
