// What a shed delivered (B4), from what is true now:
// - with a grid meter, the drop of the site's consumption (grid import plus PV output plus
//   battery discharge, so that neither PV nor a battery ever counts as shed; a hybrid by its
//   AC power, its own PV with its battery) against its
//   quiet-minute baseline, less the change of every load another event drove, capped by
//   what the loads the shed still drives account for (their own metered drop, else their
//   rating while their outputs read off, else the drop the meter saw at their step), so a
//   house-load or PV change is never credited beyond them and a shed that switched nothing
//   reports 0. A load with its
//   own meter counts by it; the grid meter speaks for the others only, so the house load's
//   noise never takes off what a metered load measured;
// - a stale reading (the device is offline: not seen for two poll intervals plus its answer
//   timeout) never enters that sum: the sample is then the loads' own estimate, never more
//   than the meter saw, and the event says `measured: false`;
// - without a meter, each load it still drives counted once: its own metered drop, else its
//   rating while its outputs read off.
import { GENERATOR_ROLES } from "../../model/roles.js";
import { acSide } from "../busy-times.js";
import type { Planned } from "../allocate.js";
import type { DeviceProgress, EventRow } from "../store.js";
import type { KindContext } from "./kind.js";

/** A device's latest readings for a measurement; undefined when they are stale. */
export type Reading = (id: string) => Record<string, number> | undefined;

/** Readings at `ts`: the snapshot's, else the device's latest while it is not stale (a bus that answered late). */
export function readingAt(ctx: KindContext, metrics: ReadonlyMap<string, Record<string, number>>, ts: number): Reading {
  return (id) => metrics.get(id) ?? (ctx.fresh(id, ts) ? ctx.device(id)?.metrics : undefined);
}

/**
 * A load's rated power that is on now: one number for the device (0 when its coils all
 * read open), or the coils of a per-coil list whose coil is closed (all of them when the
 * device does not say which).
 */
export function ratedOn(d: Planned): number | undefined {
  const r = d.device.info().rated_power_w;
  if (r === undefined) return undefined;
  const on = d.outputsOn;
  if (typeof r === "number") return on === 0 ? 0 : r;
  return r.reduce((sum, w, i) => sum + (on === undefined || Math.floor(on / 2 ** i) % 2 === 1 ? w : 0), 0);
}

export function ratedTotal(d: Planned): number | undefined {
  const r = d.device.info().rated_power_w;
  return typeof r === "number" ? r : r?.reduce((a, b) => a + b, 0);
}

/** What a step is expected to bring, before any reading shows it (stepping without a meter). */
export function expected(dp: DeviceProgress | undefined): number {
  return dp?.before_w ?? dp?.rated_w ?? 0;
}

/** A step whose every write the device refused or did not follow: it brings nothing, and the shed moves on. */
export function failedStep(dp: DeviceProgress | undefined): boolean {
  return dp !== undefined && dp.writes_failed > 0 && dp.writes_ok === 0;
}

/** Whether this shed drives the load now (last plan) and the device showed a write of it. */
export function drives(row: EventRow, ctx: KindContext, id: string): boolean {
  return (row.progress.devices[id]?.writes_ok ?? 0) > 0 && ctx.drivers(id).includes(row.spec.event_id);
}

/**
 * A load's own drop now: metered (before - now), else its rating while its outputs read off
 * (estimated), else unknown (undefined). A load this shed does not drive now brings nothing.
 * A stale load (offline, or answering exceptions) is its rating, `stale`: the coils it read
 * last are no evidence (a relay switched off, then answering exceptions, had been credited
 * nothing for 38 s by the coils it read before its write; soak 364923659 #8777).
 */
export function ownDrop(
  row: EventRow,
  ctx: KindContext,
  id: string,
  read: Reading,
): { w: number; estimated: boolean; stale?: boolean } | undefined {
  const dp = row.progress.devices[id];
  if (!dp || !drives(row, ctx, id)) return { w: 0, estimated: false };
  const m = read(id);
  const now = m?.power_w;
  if (dp.before_w !== undefined && now !== undefined) return { w: Math.max(0, dp.before_w - now), estimated: false };
  if (dp.rated_w === undefined) return undefined;
  const d = ctx.device(id);
  if (m === undefined) return { w: dp.rated_w, estimated: true, stale: true };
  const on = d?.outputsOn;
  const rated = d?.device.info().rated_power_w;
  if (d === undefined || on === undefined || rated === undefined) return { w: dp.rated_w, estimated: true };
  // Credited only for what its coils show off: a rating per coil less the coils closed now.
  const left = typeof rated === "number" ? (on === 0 ? 0 : rated) : (ratedOn(d) ?? 0);
  return { w: Math.max(0, dp.rated_w - left), estimated: true };
}

/** Devices another event drives now: its claims, and its ledger rows not yet put back. */
function drivenByOthers(row: EventRow, ctx: KindContext): string[] {
  const self = row.spec.event_id;
  const ids = new Set<string>();
  for (const d of ctx.devices) if (ctx.drivers(d.device.id).some((e) => e !== self)) ids.add(d.device.id);
  for (const l of ctx.ledgerRows()) if (l.holders.some((e) => e !== self)) ids.add(l.device_id);
  return [...ids];
}

/** Every load another event drove at any moment of this shed is compensated: remembered once seen. */
export function noteOthers(row: EventRow, ctx: KindContext): void {
  const p = row.progress;
  for (const id of drivenByOthers(row, ctx)) if (id !== p.meter_id && !(p.others ??= []).includes(id)) p.others.push(id);
}

interface Change {
  w: number;
  estimated: boolean;
  stale: boolean;
}

/**
 * The change of consumption another event's load makes now against its quiet baseline. A
 * load another shed holds off that has no power reading of its own counts with that shed's
 * estimate of it; one that had readings and has none now is stale. Generators are part of
 * the site's consumption already.
 */
function othersChange(row: EventRow, ctx: KindContext, read: Reading): Change {
  const p = row.progress;
  const out: Change = { w: 0, estimated: false, stale: false };
  for (const id of p.others ?? []) {
    // A load this shed took over from another event is its own step now: its drop is this
    // shed's delivery, not another event's change to take off.
    if (p.shed_steps.includes(id) && ctx.drivers(id).includes(row.spec.event_id)) continue;
    const d = ctx.device(id);
    if (d && GENERATOR_ROLES.has(d.descriptor.role)) continue;
    const base = p.baselines?.[id];
    const now = read(id)?.power_w;
    if (base !== undefined && now !== undefined) {
      out.w += now - base;
      continue;
    }
    if (base !== undefined) {
      out.stale = true;
      continue;
    }
    const holder = ctx.running().find((r) => r !== row && r.spec.event_type === "shed" && ctx.drivers(id).includes(r.spec.event_id));
    const dp = holder?.progress.devices[id];
    if (dp && dp.writes_ok > 0) {
      out.w -= expected(dp);
      out.estimated = true;
    }
  }
  return out;
}

/** The metered drop of consumption now (uncapped), and what the meter alone saw; undefined without a fresh meter reading. */
export function meteredDrop(row: EventRow, ctx: KindContext, read: Reading): (Change & { raw: number }) | undefined {
  const p = row.progress;
  const g = p.meter_id ? read(p.meter_id)?.power_w : undefined;
  if (g === undefined || p.baseline_w === undefined) return undefined;
  const raw = p.baseline_w - g;
  const others = othersChange(row, ctx, read);
  let w = raw + others.w;
  let stale = others.stale;
  for (const d of ctx.devices) {
    const base = p.baselines?.[d.device.id];
    if (!GENERATOR_ROLES.has(d.descriptor.role) || base === undefined) continue;
    const now = acSide(read(d.device.id));
    if (now === undefined) stale = true;
    else w += base - now;
  }
  return { w, raw, estimated: others.estimated, stale };
}

/**
 * What the loads this shed still drives account for: their own metered drops (`measured`),
 * and the rest (`other`): a rating while the outputs read off, else the drop the grid meter
 * saw at the load's step (the mean of a few readings after it, against those before it), so
 * a house-load fall around the step is never credited to it. A load with none of these yet
 * (its step not read back) is `unknown` and sets no cap.
 */
export function account(
  row: EventRow,
  ctx: KindContext,
  read: Reading,
): { measured: number; other: number; estimated: boolean; unknown: boolean; stale: boolean } {
  const out = { measured: 0, other: 0, estimated: false, unknown: false, stale: false };
  for (const id of row.progress.shed_steps) {
    if (!drives(row, ctx, id)) continue;
    const own = ownDrop(row, ctx, id, read);
    if (own && !own.estimated) out.measured += own.w;
    else if (own) {
      out.other += own.w;
      out.estimated = true;
      out.stale ||= own.stale === true;
    } else if (row.progress.devices[id]?.drop_w !== undefined) {
      out.other += row.progress.devices[id].drop_w;
      out.estimated = true;
    } else {
      out.unknown = true;
      out.estimated = true;
    }
  }
  return out;
}

/**
 * One sample of the shed's delivery. With a fresh meter: the loads' own metered drops, and
 * for the rest the metered drop beyond them, capped by what the rest account for (so the
 * whole is never more than the loads account for). With a stale reading in it (one of its own
 * loads too), or none from the meter: the loads' own account (unknown loads as 0), never more
 * than the meter saw; estimated.
 */
export function shedSample(
  row: EventRow,
  metered: ReturnType<typeof meteredDrop>,
  acc: ReturnType<typeof account>,
): { w: number; estimated: boolean } {
  const total = acc.measured + acc.other;
  if (metered && !metered.stale && !acc.stale) {
    const rest = Math.max(0, Math.min(metered.w - acc.measured, acc.unknown ? Infinity : acc.other));
    return { w: acc.measured + rest, estimated: metered.estimated };
  }
  if (!row.progress.meter_id) return { w: total, estimated: acc.estimated };
  return { w: Math.max(0, Math.min(total, metered ? metered.raw : total)), estimated: true };
}
