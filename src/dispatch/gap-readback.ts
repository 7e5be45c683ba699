// B4 restart gap after a crash: "for the restart gap it counts what the devices read back
// once it is up again". An event whose end passed while the gateway was down after a crash
// (its devices held what they were told) has no reading after the restart yet when the
// gateway comes back; ending it at once would count the whole gap as nothing. It stays
// running until its devices' first reading after the restart (at most the hold time),
// which stands for the gap, and then ends.
import type { Snapshot } from "../telemetry/types.js";
import type { Executor } from "./executor.js";
import type { EventRow } from "./store.js";

export { putBack, resumed } from "./measure.js";

/** Whether a running event ends now: its end has passed, and it waits for no read-back. */
export function endsNow(row: EventRow, now: number, holdMs: number): boolean {
  return row.spec.end_ms <= now && !awaitsReadBack(row, now, holdMs);
}

/** Whether an event past its end still waits for the first reading after a crash's restart. */
export function awaitsReadBack(row: EventRow, now: number, holdMs: number): boolean {
  const p = row.progress;
  if (p.resumed_at === undefined || row.spec.end_ms > now || now >= p.resumed_at + holdMs) return false;
  return (p.driven?.at ?? -Infinity) < p.resumed_at;
}

/** When a running event is next due to end: its end, or for one waiting for its read-back, the hold time after the restart. */
export function endDue(row: EventRow, now: number, holdMs: number): number {
  return awaitsReadBack(row, now, holdMs) ? (row.progress.resumed_at ?? now) + holdMs : row.spec.end_ms;
}

/** A poll snapshot to the executor; true when an event past its end was waiting for it (it can end now). */
export function observeRunning(exec: Executor, snap: Snapshot, running: ReadonlyMap<string, EventRow>, now: number): boolean {
  exec.observe(snap, [...running.values()], now);
  return [...running.values()].some((r) => r.spec.end_ms <= now);
}
