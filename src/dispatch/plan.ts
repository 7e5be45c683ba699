// One plan of every running event, in B4 order: live events first, then test events on a
// copy of what the live ones left (a test event never takes a device from a live one).
// Each event's kind claims from what is left; the live claims merge per device into what
// is written (stacking: one setpoint, the sum of the events' shares).
import { compareEvents, pctOf, type Planned } from "./allocate.js";
import type { ActionName } from "../model/vocabulary.js";
import { kindOf } from "./kinds/index.js";
import { Capacity, type Claim, type KindContext } from "./kinds/kind.js";
import type { EventRow } from "./store.js";

/** What the live events want of one device. */
export interface Desired {
  action: ActionName;
  watts?: number;
  pct?: number;
  rows: Array<{ row: EventRow; watts: number }>;
}

export interface Plan {
  /** Live claims merged per device. */
  desired: Map<string, Desired>;
  /** Devices each event (live or test) claimed. */
  claimed: Map<string, string[]>;
}

export function planAll(
  running: readonly EventRow[],
  ctx: KindContext,
  devs: readonly Planned[],
  failed: (row: EventRow, e: unknown) => void,
): Plan {
  const desired = new Map<string, Desired>();
  const claimed = new Map<string, string[]>();
  let cap = new Capacity();
  for (const mode of ["live", "test"] as const) {
    if (mode === "test") cap = cap.clone();
    const rows = running.filter((r) => r.spec.mode === mode && r.state === "running").sort((a, b) => compareEvents(a.spec, b.spec));
    for (const row of rows) {
      let claims: Claim[] = [];
      try {
        claims = kindOf(row.spec.event_type).plan(row, ctx, cap);
      } catch (e) {
        failed(row, e);
      }
      claimed.set(
        row.spec.event_id,
        claims.map((c) => c.device_id),
      );
      if (mode === "test") continue; // test mode plans like live but writes nothing
      for (const c of claims) merge(desired, devs, row, c);
    }
  }
  return { desired, claimed };
}

function merge(desired: Map<string, Desired>, devs: readonly Planned[], row: EventRow, c: Claim): void {
  const w = desired.get(c.device_id);
  if (!w) desired.set(c.device_id, { action: c.action, watts: c.watts, pct: c.pct, rows: [{ row, watts: c.watts ?? 0 }] });
  else if (w.action === c.action) {
    // Stacking: one setpoint, the sum of the events' shares.
    w.watts = (w.watts ?? 0) + (c.watts ?? 0);
    const d = devs.find((x) => x.device.id === c.device_id);
    if (d?.descriptor.max_power_w) w.pct = pctOf(w.watts, d.descriptor.max_power_w);
    w.rows.push({ row, watts: c.watts ?? 0 });
  }
}

/** An event's fraction of a device's setpoint from the live claims on it (0 when it has none). */
export function shareOf(claims: ReadonlyArray<{ event_id: string; watts: number }>, eventId: string): number {
  const mine = claims.find((c) => c.event_id === eventId);
  if (!mine) return 0;
  const total = claims.reduce((s, c) => s + c.watts, 0);
  return total > 0 ? mine.watts / total : 1;
}
