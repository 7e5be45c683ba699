// Which meter is the grid meter: the one dispatch measures a shed against and the status
// page shows as the grid. One rule for both, so they never disagree.
import { byCodeUnit } from "../util/compare.js";
import type { Role } from "../model/roles.js";

/** What the rule needs to know of a device. */
export interface MeterCandidate {
  device_id: string;
  role: Role;
  fully_configured: boolean;
  online: boolean;
  /** Its latest power reading, if any. */
  power_w: number | undefined;
}

/**
 * The grid meter: among the fully configured meters that are online with a power reading,
 * one whose id says "grid" first, then the first by id.
 */
export function gridMeter<T>(devices: Iterable<T>, view: (d: T) => MeterCandidate): T | undefined {
  let best: { d: T; id: string } | undefined;
  for (const d of devices) {
    const c = view(d);
    if (c.role !== "meter" || !c.fully_configured || !c.online || c.power_w === undefined) continue;
    if (!best || gridFirst(c.device_id, best.id) < 0) best = { d, id: c.device_id };
  }
  return best?.d;
}

function gridFirst(a: string, b: string): number {
  return Number(!/grid/i.test(a)) - Number(!/grid/i.test(b)) || byCodeUnit(a, b);
}
