// The interface every event kind implements: which devices it can drive, what it claims
// of them while it runs (planned in B4 order against what earlier events left: stacking),
// what it makes of each telemetry snapshot, and its execution result. The executor does
// the rest for every kind alike: writes through the device ledger, releases, coverage,
// test mode and the response's common fields. A new kind is one new file here plus its
// line in index.ts.
import type { ActionName } from "../../model/vocabulary.js";
import type { PreState } from "../../model/device.js";
import { statusFor, type Planned } from "../allocate.js";
import { byCodeUnit } from "../../util/compare.js";
import type { LedgerRow } from "../ledger.js";
import type { EventType } from "../../model/vocabulary.js";
import type { DeviceProgress, EventRow } from "../store.js";

/** What one event wants written to one device. */
export interface Claim {
  device_id: string;
  action: ActionName;
  /** Power share (charge/discharge, summed with other events' shares on the same device). */
  watts?: number;
  /** Percent parameter of the action (curtailment limit). */
  pct?: number;
}

/**
 * What is left of each device while one assignment (live, or test) is planned in B4
 * order: a battery can carry several events of one direction up to its maximum power; a
 * shed load or a PV inverter under a limit belongs to one event.
 */
export class Capacity {
  private readonly taken = new Map<string, { action: ActionName; used_w: number; exclusive: boolean; by: string[] }>();

  /** Watts left on the device for this action (0 when another action or an exclusive claim holds it). */
  left(d: Planned, action: ActionName): number {
    const t = this.taken.get(d.device.id);
    if (!t) return d.descriptor.max_power_w ?? 0;
    if (t.exclusive || t.action !== action) return 0;
    return Math.max(0, (d.descriptor.max_power_w ?? 0) - t.used_w);
  }

  /** A copy to plan further events in without touching this one (test mode against live). */
  clone(): Capacity {
    const c = new Capacity();
    for (const [id, t] of this.taken) c.taken.set(id, { ...t, by: [...t.by] });
    return c;
  }

  free(deviceId: string): boolean {
    return !this.taken.has(deviceId);
  }

  /** The events holding the device, in the order they took it. */
  takenBy(deviceId: string): readonly string[] {
    return this.taken.get(deviceId)?.by ?? [];
  }

  take(deviceId: string, eventId: string, action: ActionName, watts: number, exclusive: boolean): void {
    const t = this.taken.get(deviceId);
    if (!t) this.taken.set(deviceId, { action, used_w: watts, exclusive, by: [eventId] });
    else {
      t.used_w += watts;
      t.exclusive ||= exclusive;
      if (!t.by.includes(eventId)) t.by.push(eventId);
    }
  }
}

/** What a kind may ask of the executor. */
export interface KindContext {
  now: number;
  /** Sample hold time (ms): how long one reading stands for its device. */
  hold: number;
  devices: readonly Planned[];
  device(id: string): Planned | undefined;
  /** The grid meter (B4: a fully configured meter, one named "grid" first). */
  gridMeter(): Planned | undefined;
  /** A device's mean power at the AC side in the 60 s before `until` (busy-times.ts acSide: a hybrid's AC power, else power_w). */
  baseline(id: string, until: number): number | undefined;
  /** The end of the latest 60 s before `before` in which no event drove any device (up to 15 min back), if any. */
  quietUntil(before: number): number | undefined;
  /** Time of the device's latest reading (0: none yet). */
  seenAt(id: string): number;
  /**
   * Whether the device's reading is fresh at `at` (B4): not offline, that is seen within two
   * poll intervals plus its answer timeout (a pushed device is in every snapshot while its
   * bridge is up). A stale reading never enters a measurement.
   */
  fresh(id: string, at: number): boolean;
  /** The live events that drive the device now (last plan). */
  drivers(id: string): readonly string[];
  /** This event's fraction of the device's setpoint (0 when it does not drive it). */
  share(id: string, eventId: string): number;
  ledger(id: string): LedgerRow | undefined;
  ledgerRows(): readonly LedgerRow[];
  /** Running events (live and test). */
  running(): readonly EventRow[];
  /** Devices claimed in the last plan of an event (any mode). */
  claimedBy(eventId: string): readonly string[];
  /** Ends another running event now, with `reason` in its result (a restore ends sheds). */
  end(row: EventRow, reason: string): void;
  /** Reads a device back against `pre`; `done` gets undefined when it matches, else what differs. */
  verify(id: string, pre: PreState, done: (mismatch: string | undefined) => void): void;
  /** Commits the event's progress. */
  save(row: EventRow): void;
}

export interface DeviceEntry {
  device_id: string;
  status: "completed" | "partial" | "failed" | "skipped";
  requested_w: number;
  delivered_w: number;
  error?: string;
}

export interface KindResult {
  delivered_w: number;
  devices: DeviceEntry[];
  /** Overrides the status the thresholds give. */
  status?: "completed" | "partial" | "failed";
  /** false when any part of the delivered quantity is estimated. */
  measured: boolean;
  /** Overrides the coverage the executor measures (a test event's: nothing was measured). */
  coverage?: number;
  details?: Record<string, unknown>;
}

export interface EventKind {
  readonly types: readonly EventType[];
  /** Whether an event of this type can drive this device at all. */
  capable(type: EventType, d: Planned): boolean;
  /** Once, when the event starts (before its first plan). */
  begin?(row: EventRow, ctx: KindContext): void;
  /** Claims, in B4 order, from what `cap` has left; takes what it claims from `cap`. */
  plan(row: EventRow, ctx: KindContext, cap: Capacity): Claim[];
  /** A live event's measurement from one snapshot (device_id -> metrics). */
  observe?(row: EventRow, ctx: KindContext, metrics: ReadonlyMap<string, Record<string, number>>, ts: number): void;
  /**
   * One device's reading taken right after a setpoint write to it, between two polls (its
   * power only; `at` is when the answer arrived). A kind that measures each device on its
   * own takes it as one more sample of that device; a kind that compares devices at one
   * instant (shed against the grid meter) leaves it out and waits for the poll.
   */
  confirmed?(row: EventRow, ctx: KindContext, deviceId: string, metrics: Readonly<Record<string, number>>, at: number): void;
  /** Whether the event counts as driving its devices now (coverage); by default: a write acknowledged. */
  driving?(row: EventRow, ctx: KindContext): boolean;
  result(row: EventRow, ctx: KindContext, until: number): KindResult;
  /** A test event's result; by default its plan (plannedResult): nothing was written, nothing measured. */
  testResult?(row: EventRow, ctx: KindContext, until: number): KindResult;
}

/** A test event's plan as its result: each device it would drive delivers what it would be asked for. */
export function plannedResult(row: EventRow): KindResult {
  const s = row.spec;
  const devices: DeviceEntry[] = Object.entries(row.progress.devices)
    .sort(([a], [b]) => byCodeUnit(a, b))
    .map(([id, dp]) => ({
      device_id: id,
      status: dp.skipped ? "skipped" : "completed",
      requested_w: Math.round(dp.requested_w),
      delivered_w: dp.skipped ? 0 : Math.round(dp.requested_w),
      ...(dp.skipped ? { error: dp.skipped } : {}),
    }));
  const planned = Math.min(
    s.quantity_w,
    devices.reduce((a, d) => a + d.delivered_w, 0),
  );
  return {
    delivered_w: planned,
    devices,
    status: statusFor(planned, s.quantity_w),
    measured: false,
    coverage: devices.some((d) => d.status !== "skipped") ? 1 : 0,
  };
}

export function deviceProgress(row: EventRow, id: string): DeviceProgress {
  return (row.progress.devices[id] ??= { requested_w: 0, writes_ok: 0, writes_failed: 0 });
}
