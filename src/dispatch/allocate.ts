// Pure dispatch planning: the B4 order of overlapping events, how a charge or discharge
// is split across batteries (with what earlier events left of them), and the status
// thresholds.
// No I/O here: the dispatcher feeds it the devices as telemetry sees them.
import type { EventSpec } from "./request.js";
import { byCodeUnit } from "../util/compare.js";

export { pctOf } from "../model/power.js";

import type { Device, DeviceDescriptor, Metrics } from "../model/device.js";

/**
 * A device in one plan: the device itself (its interfaces, info and health), and what this
 * plan sees of it that is not the device, taken once per plan (dispatch/devices.ts planned()):
 * its descriptor and readings at that moment, and the executor's and the gap read-back's
 * word on whether it may be used.
 */
export interface Planned {
  readonly device: Device;
  /** What it is (device.descriptor() when the plan was built; a device without one is not planned). */
  readonly descriptor: DeviceDescriptor;
  /** Reachable for this plan: its health, true for one that answered the read-back after a crash, false while blocked. */
  online: boolean;
  /** Its latest readings when the plan was built. */
  metrics: Metrics;
  /** A relay's closed outputs as a bit mask (output 0 = bit 0), from the same readings. */
  outputsOn?: number;
  /** Why no event may use it now (a release it did not read back): new events skip it with this. */
  blocked?: string;
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
export function batteryUnavailable(type: "charge" | "discharge", d: Planned): string | undefined {
  if (!d.device.info().fully_configured) return "not fully configured (REGISTRY_WRITE_FAILED)";
  if (d.blocked) return d.blocked;
  if (!d.online) return "offline";
  const max = d.descriptor.max_power_w;
  if (!max || max <= 0) return "no maximum power known";
  const soc = d.metrics.soc_pct;
  if (soc !== undefined && type === "discharge" && soc <= 0.5) return `empty (soc ${soc} %)`;
  if (soc !== undefined && type === "charge" && soc >= 99.5) return `full (soc ${soc} %)`;
  return undefined;
}

/** The battery's live limit for this direction (its BMS's charge or discharge maximum), unbounded where it publishes none. */
export function liveLimit(type: "charge" | "discharge", d: Planned): number {
  const w = type === "charge" ? d.metrics.max_charge_power_w : d.metrics.max_discharge_power_w;
  return typeof w === "number" && w > 0 ? w : Number.POSITIVE_INFINITY;
}

/**
 * Splits `watts` across batteries in proportion to their maximum power, each capped at
 * its maximum and its live limit for the direction; a battery that cannot take a share gives it to the others. The result
 * lists every device in input order.
 */
export function allocateProportional(
  type: "charge" | "discharge",
  watts: number,
  devices: readonly Planned[],
  /** What is left of each device for this event (stacking); its maximum power by default. */
  capOf: (d: Planned) => number = (d) => d.descriptor.max_power_w ?? 0,
): Share[] {
  const shares = new Map<string, Share>();
  const open: Planned[] = [];
  for (const d of devices) {
    const unavailable = batteryUnavailable(type, d);
    if (unavailable) shares.set(d.device.id, { device_id: d.device.id, watts: 0, skipped: unavailable, reason: "unavailable" });
    else if (capOf(d) <= 0)
      shares.set(d.device.id, {
        device_id: d.device.id,
        watts: 0,
        skipped: "no capacity left (taken by events before this one)",
        reason: "taken",
      });
    else {
      shares.set(d.device.id, { device_id: d.device.id, watts: 0 });
      open.push(d);
    }
  }
  let left = Math.max(0, watts);
  // Water-filling: split what is left in proportion among the batteries not yet at their
  // cap; those that hit it drop out and the rest is split again.
  while (left > 1e-9 && open.length > 0) {
    const total = open.reduce((s, d) => s + d.descriptor.max_power_w!, 0);
    let capped = false;
    for (let i = open.length - 1; i >= 0; i--) {
      const d = open[i]!; // i runs down over open's own indices
      const s = shares.get(d.device.id)!;
      const want = (left * d.descriptor.max_power_w!) / total;
      const cap = Math.min(d.descriptor.max_power_w!, capOf(d), liveLimit(type, d));
      if (s.watts + want >= cap) {
        left -= cap - s.watts;
        s.watts = cap;
        open.splice(i, 1);
        capped = true;
      }
    }
    if (capped) continue;
    for (const d of open) shares.get(d.device.id)!.watts += (left * d.descriptor.max_power_w!) / total;
    left = 0;
  }
  for (const s of shares.values()) {
    if (s.skipped || s.watts > 0) continue;
    s.skipped = "no share left";
    s.reason = "no_share";
  }
  return devices.map((d) => shares.get(d.device.id)!);
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
