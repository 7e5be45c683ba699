// Pure dispatch planning: the B4 order of overlapping events, how a charge or discharge
// is split across batteries (with what earlier events left of them), and the status
// thresholds.
// No I/O here: the dispatcher feeds it the devices as telemetry sees them.
import type { EventSpec } from "./request.js";
import { byCodeUnit } from "../util/compare.js";
import type { Role } from "../model/roles.js";

export { pctOf } from "../model/power.js";

import type { Device } from "../model/device.js";

/** A device as the dispatcher sees it (registry + health + latest telemetry). */
export interface DispatchDevice {
  device_id: string;
  role: Role;
  /** The device itself: the kinds decide from the interfaces it implements (power, curtail, switch, setpoint). */
  device: Device;
  max_power_w?: number;
  fully_configured: boolean;
  online: boolean;
  metrics: Record<string, number>;
  /** A relay's closed coils as a bit mask (first coil = bit 0), from its latest reading. */
  coils_on?: number;
  /** Device config: the rated load a switch carries, one number or one per coil (shed without a meter). */
  rated_power_w?: number | readonly number[];
  /** Device config: shed order, lower first, then device_id (default 100). */
  shed_priority?: number;
  /** Why no event may use it now (a release it did not read back): new events skip it with this. */
  blocked?: string;
  /** A battery's reading against its forced mode (PowerControllable.showsForced): false once it is on its own. */
  showsForced?(direction: "charge" | "discharge", metrics: Readonly<Record<string, number>>): boolean | undefined;
}

/**
 * B4 overlap rule, with live before test: for each device, the running event with the
 * lowest priority number wins; ties go to mandatory, then the earlier start_time (then the
 * event_id, so the answer never depends on the order events were loaded in).
 */
export function compareEvents(a: EventSpec, b: EventSpec): number {
  return (
    (a.mode === "live" ? 0 : 1) - (b.mode === "live" ? 0 : 1) ||
    a.priority - b.priority ||
    (a.mandatory ? 0 : 1) - (b.mandatory ? 0 : 1) ||
    a.start_ms - b.start_ms ||
    byCodeUnit(a.event_id, b.event_id)
  );
}

export interface Share {
  device_id: string;
  watts: number;
  /** Why the device gets nothing (offline, empty, full, not fully configured, no share left). */
  skipped?: string;
  /**
   * What `skipped` comes from: the battery itself (`unavailable`), or what events before
   * this one took of it (`taken`: nothing left; `no_share`: the rest went elsewhere).
   */
  reason?: SkipReason;
}

export type SkipReason = "unavailable" | "taken" | "no_share";

/** A battery's state of charge says it can take no more of this direction. */
export function batteryUnavailable(type: "charge" | "discharge", d: DispatchDevice): string | undefined {
  if (!d.fully_configured) return "not fully configured (REGISTRY_WRITE_FAILED)";
  if (d.blocked) return d.blocked;
  if (!d.online) return "offline";
  if (!d.max_power_w || d.max_power_w <= 0) return "no maximum power known";
  const soc = d.metrics.soc_pct;
  if (soc !== undefined && type === "discharge" && soc <= 0.5) return `empty (soc ${soc} %)`;
  if (soc !== undefined && type === "charge" && soc >= 99.5) return `full (soc ${soc} %)`;
  return undefined;
}

/**
 * Splits `watts` across batteries in proportion to their maximum power, each capped at
 * its maximum; a battery that cannot take a share gives it to the others. The result
 * lists every device in input order.
 */
export function allocateProportional(
  type: "charge" | "discharge",
  watts: number,
  devices: readonly DispatchDevice[],
  /** What is left of each device for this event (stacking); its maximum power by default. */
  capOf: (d: DispatchDevice) => number = (d) => d.max_power_w ?? 0,
): Share[] {
  const shares = new Map<string, Share>();
  const open: DispatchDevice[] = [];
  for (const d of devices) {
    const unavailable = batteryUnavailable(type, d);
    if (unavailable) shares.set(d.device_id, { device_id: d.device_id, watts: 0, skipped: unavailable, reason: "unavailable" });
    else if (capOf(d) <= 0)
      shares.set(d.device_id, {
        device_id: d.device_id,
        watts: 0,
        skipped: "no capacity left (taken by events before this one)",
        reason: "taken",
      });
    else {
      shares.set(d.device_id, { device_id: d.device_id, watts: 0 });
      open.push(d);
    }
  }
  let left = Math.max(0, watts);
  // Water-filling: split what is left in proportion among the batteries not yet at their
  // cap; those that hit it drop out and the rest is split again.
  while (left > 1e-9 && open.length > 0) {
    const total = open.reduce((s, d) => s + d.max_power_w!, 0);
    let capped = false;
    for (let i = open.length - 1; i >= 0; i--) {
      const d = open[i]!; // i runs down over open's own indices
      const s = shares.get(d.device_id)!;
      const want = (left * d.max_power_w!) / total;
      const cap = Math.min(d.max_power_w!, capOf(d));
      if (s.watts + want >= cap) {
        left -= cap - s.watts;
        s.watts = cap;
        open.splice(i, 1);
        capped = true;
      }
    }
    if (capped) continue;
    for (const d of open) shares.get(d.device_id)!.watts += (left * d.max_power_w!) / total;
    left = 0;
  }
  for (const s of shares.values()) {
    if (s.skipped || s.watts > 0) continue;
    s.skipped = "no share left";
    s.reason = "no_share";
  }
  return devices.map((d) => shares.get(d.device_id)!);
}

export type ResultStatus = "completed" | "partial" | "failed";

/** B4 thresholds: completed at >= 95 % of the request, failed below 5 %, partial between. */
export function statusFor(delivered: number, requested: number): ResultStatus {
  if (requested <= 0) return "completed";
  const r = delivered / requested;
  if (r >= 0.95) return "completed";
  if (r < 0.05) return "failed";
  return "partial";
}
