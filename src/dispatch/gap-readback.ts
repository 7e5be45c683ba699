// B4 restart gaps. A clean stop puts every device back, so the means of its events end at
// the stop (putBack). After a crash: "for the restart gap it counts what the devices read back
// once it is up again". An event whose end passed while the gateway was down after a crash
// (its devices held what they were told) has no reading after the restart yet when the
// gateway comes back; ending it at once would count the whole gap as nothing. It stays
// running until its devices' first reading after the restart (at most the hold time),
// which stands for the gap, and then ends.
import type { Snapshot } from "../telemetry/types.js";
import type { Executor } from "./executor.js";
import type { EventRow, Progress } from "./store.js";

import { addSample, type MeanState } from "./measure.js";

export { resumed } from "./measure.js";

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

/**
 * A clean stop at `now` puts every device back (B4): what each mean of the event held ends
 * there, so the sample before the stop does not go on counting into the gap that follows.
 */
export function putBack(p: Progress, now: number, holdMs: number): void {
  const close = (s: MeanState | undefined) => (s ? addSample(s, now, 0, holdMs) : undefined);
  if (p.driven) p.driven = close(p.driven);
  if (p.drop) p.drop = close(p.drop);
  for (const dp of Object.values(p.devices)) if (dp.mean) dp.mean = close(dp.mean);
  p.put_back = true;
}
