// Settings a device keeps in flash (a time-of-use program, a grid-charge current) wear
// with every write, and an event writes them twice (its setting, then the pre-event state
// back): such a write goes out only to the registers that hold another value, read just
// before. Each register is compared alone: flash settings are single registers.
import type { CellRead } from "./pre-state.js";
import type { RawWrite } from "./raw-write.js";

/**
 * What of a write must go out: a flash write's registers that read another value now, as
 * runs of neighbouring registers (nothing when all hold); any other write as it is.
 */
export async function changedOnly(w: RawWrite, read: CellRead): Promise<RawWrite[]> {
  if (!w.flash || w.table !== "holding") return [w];
  const now = await read("holding", w.address, w.words.length, w.unit);
  const out: RawWrite[] = [];
  let run: RawWrite | null = null;
  for (const [i, v] of w.words.entries()) {
    if (now[i] === v) run = null;
    else if (run) run.words.push(v);
    else out.push((run = { ...w, address: w.address + i, words: [v] }));
  }
  return out;
}
