// shed: loads only (switchable loads off, thermostats set back), stepped in shed_priority
// order until the drop covers the quantity. Never PV or a battery: curtailing PV raises
// grid import, the opposite of a shed. The drop is measured on the grid meter against the
// last quiet minute before the start (less what other events' devices changed) or, without
// a meter or a quiet minute, estimated from each load once. The rules of stepping and
// measuring: docs/dispatch.md (shed).
import { GENERATOR_ROLES, type Role } from "../../model/roles.js";
import { statusFor, type DispatchDevice } from "../allocate.js";
import { addSample, meanUntil } from "../measure.js";
import type { EventType } from "../../model/vocabulary.js";
import type { DeviceProgress, EventRow, StepExpectation } from "../store.js";
import { byCodeUnit } from "../../util/compare.js";
import { deviceProgress, type Capacity, type Claim, type DeviceEntry, type EventKind, type KindContext, type KindResult } from "./kind.js";

/** The roles a shed turns down: a switch goes off, a thermostat is set back by its setback_c. */
const LOAD_ROLES: ReadonlySet<Role> = new Set(["switch", "thermostat"]);
const isLoad = (d: DispatchDevice) => LOAD_ROLES.has(d.role);

/** shed_priority of a device without one. */
export const DEFAULT_SHED_PRIORITY = 100;

/** B4 shed order: shed_priority (lower first; default 100), then device_id. */
export function shedOrder(a: DispatchDevice, b: DispatchDevice): number {
  const pa = a.shed_priority ?? DEFAULT_SHED_PRIORITY;
  const pb = b.shed_priority ?? DEFAULT_SHED_PRIORITY;
  return pa !== pb ? (pa < pb ? -1 : 1) : byCodeUnit(a.device_id, b.device_id);
}

/**
 * A load's rated power that is on now: one number for the device, or the coils of a
 * per-coil list whose coil is closed (all of them when the device does not say which).
 */
export function ratedOn(d: DispatchDevice): number | undefined {
  const r = d.rated_power_w;
  if (r === undefined) return undefined;
  if (typeof r === "number") return r;
  const on = d.coils_on;
  return r.reduce((sum, w, i) => sum + (on === undefined || Math.floor(on / 2 ** i) % 2 === 1 ? w : 0), 0);
}

/**
 * A step's expectations: the load's own power before it (metered plug or thermostat), else
 * its rating. A load taken over from another shed is off already: it brings what it brought
 * that shed (`held`), not what it reads now.
 */
function step(d: DispatchDevice, dp: DeviceProgress, missing: number, held: StepExpectation | undefined): void {
  if (held) {
    dp.before_w = held.before_w;
    dp.rated_w = held.rated_w;
  } else {
    dp.before_w = d.metrics.power_w !== undefined ? Math.max(0, d.metrics.power_w) : undefined;
    dp.rated_w = d.role === "thermostat" ? ratedTotal(d) : ratedOn(d);
  }
  dp.requested_w = Math.min(missing, expected(dp) || missing);
}

/**
 * Keeps what another shed's step expected of each load it drove in the last plan and had
 * switched off (a write acknowledged). That shed may end before this one takes the load
 * over, in the same plan that takes it (so it is gone from the running events then); the
 * load stays off in between, never put back. A load no other event drove in the last plan
 * is forgotten: taking it is a step like any other.
 */
function noteHeld(row: EventRow, ctx: KindContext): void {
  const p = row.progress;
  for (const d of ctx.devices) {
    const id = d.device_id;
    const by = ctx.drivers(id).filter((e) => e !== row.spec.event_id);
    if (by.length === 0) {
      if (p.held?.[id]) delete p.held[id];
      continue;
    }
    const holder = ctx.running().find((r) => r !== row && r.spec.event_type === "shed" && by.includes(r.spec.event_id));
    const dp = holder?.progress.devices[id];
    if (dp && dp.writes_ok > 0) (p.held ??= {})[id] = { before_w: dp.before_w, rated_w: dp.rated_w };
  }
}

function ratedTotal(d: DispatchDevice): number | undefined {
  const r = d.rated_power_w;
  return typeof r === "number" ? r : r?.reduce((a, b) => a + b, 0);
}

/** What a step is expected to bring, before any reading shows it (stepping without a meter). */
function expected(dp: DeviceProgress | undefined): number {
  return dp?.before_w ?? dp?.rated_w ?? 0;
}

/** A shed load's own drop now: metered (before - now), else its rating (estimated), else unknown (0, estimated). */
function ownDrop(dp: DeviceProgress, w: number | undefined): { w: number; estimated: boolean } {
  if (dp.writes_ok === 0) return { w: 0, estimated: false };
  if (dp.before_w !== undefined && w !== undefined) return { w: Math.max(0, dp.before_w - w), estimated: false };
  return { w: dp.rated_w ?? 0, estimated: true };
}

/** Devices another event drives now: its claims, and its ledger rows not yet put back. */
function drivenByOthers(row: EventRow, ctx: KindContext): string[] {
  const self = row.spec.event_id;
  const ids = new Set<string>();
  for (const d of ctx.devices) if (ctx.drivers(d.device_id).some((e) => e !== self)) ids.add(d.device_id);
  for (const l of ctx.ledgerRows()) if (l.holders.some((e) => e !== self)) ids.add(l.device_id);
  return [...ids];
}

/**
 * The change of import another event's device makes now against its quiet baseline: a
 * generator's rise lowers import, a load's rise raises it. A load another shed holds off
 * and that has no power reading of its own counts with that shed's estimate of it.
 */
function othersChange(
  row: EventRow,
  ctx: KindContext,
  metrics: (id: string) => Record<string, number> | undefined,
): { w: number; estimated: boolean } {
  const p = row.progress;
  let w = 0;
  let estimated = false;
  for (const id of p.others ?? []) {
    // A load this shed took over from another event is its own step now: its drop is this
    // shed's delivery, not another event's change to take off.
    if (p.shed_steps.includes(id) && ctx.drivers(id).includes(row.spec.event_id)) continue;
    const base = p.baselines?.[id];
    const now = metrics(id)?.power_w;
    const d = ctx.device(id);
    if (base !== undefined && now !== undefined) {
      w += (d && GENERATOR_ROLES.has(d.role) ? -1 : 1) * (now - base);
      continue;
    }
    const holder = ctx.running().find((r) => r !== row && r.spec.event_type === "shed" && ctx.drivers(id).includes(r.spec.event_id));
    const dp = holder?.progress.devices[id];
    if (dp && dp.writes_ok > 0) {
      w -= expected(dp);
      estimated = true;
    }
  }
  return { w, estimated };
}

/** The grid meter's drop now against the quiet baseline, less other events' changes (undefined without a reading). */
function meteredDrop(
  row: EventRow,
  ctx: KindContext,
  metrics: (id: string) => Record<string, number> | undefined,
): { w: number; estimated: boolean } | undefined {
  const p = row.progress;
  const g = p.meter_id ? metrics(p.meter_id)?.power_w : undefined;
  if (g === undefined || p.baseline_w === undefined) return undefined;
  const others = othersChange(row, ctx, metrics);
  return { w: p.baseline_w - g + others.w, estimated: others.estimated };
}

/** Every device another event drove at any moment of this shed is compensated: remembered once seen. */
function noteOthers(row: EventRow, ctx: KindContext): void {
  const p = row.progress;
  for (const id of drivenByOthers(row, ctx)) if (id !== p.meter_id && !(p.others ??= []).includes(id)) p.others.push(id);
}

/** Marks the devices the shed would use next but cannot (offline, not fully configured) as skipped. */
function skipUnusable(row: EventRow, order: readonly DispatchDevice[], upTo: number): void {
  for (const d of upTo < 0 ? order : order.slice(0, upTo)) {
    if (row.progress.shed_steps.includes(d.device_id) || (d.online && d.fully_configured)) continue;
    const dp = deviceProgress(row, d.device_id);
    if (dp.writes_ok + dp.writes_failed === 0)
      dp.skipped = d.blocked ?? (d.fully_configured ? "offline" : "not fully configured (REGISTRY_WRITE_FAILED)");
  }
}

export const shed: EventKind = {
  types: ["shed"],

  capable(type: EventType, d: DispatchDevice): boolean {
    return type === "shed" && d.capabilities.includes("shed") && isLoad(d);
  },

  begin(row: EventRow, ctx: KindContext): void {
    const p = row.progress;
    noteHeld(row, ctx);
    const meter = ctx.gridMeter();
    const quiet = ctx.quietUntil(row.spec.start_ms);
    const base = meter && quiet !== undefined ? ctx.baseline(meter.device_id, quiet) : undefined;
    // No meter, or no quiet minute to compare with: the drop is estimated from the loads.
    if (!meter || quiet === undefined || base === undefined) return;
    p.meter_id = meter.device_id;
    p.baseline_w = base;
    p.baselines = {};
    for (const d of ctx.devices) {
      if (d.device_id === meter.device_id) continue;
      const b = ctx.baseline(d.device_id, quiet);
      if (b !== undefined) p.baselines[d.device_id] = b;
    }
    noteOthers(row, ctx);
  },

  plan(row: EventRow, ctx: KindContext, cap: Capacity): Claim[] {
    const s = row.spec;
    const p = row.progress;
    const test = s.mode === "test";
    const claims: Claim[] = [];
    const claim = (d: DispatchDevice) => {
      cap.take(d.device_id, s.event_id, "shed", 0, true);
      claims.push({ device_id: d.device_id, action: "shed" });
    };
    noteHeld(row, ctx);
    for (const id of p.shed_steps) {
      const d = ctx.device(id);
      const dp = deviceProgress(row, id);
      if (!d) continue;
      if (cap.free(id)) {
        dp.skipped = undefined;
        claim(d);
      } else dp.skipped = `driven by event ${cap.takenBy(id).join(", ")} (before this one in B4 order)`;
    }
    if (p.meter_id && !test) noteOthers(row, ctx);
    const order = ctx.devices.filter((d) => this.capable("shed", d)).sort(shedOrder);
    const meter = p.meter_id ? ctx.device(p.meter_id) : undefined;
    for (;;) {
      const last = p.shed_steps[p.shed_steps.length - 1];
      const dl = last ? p.devices[last] : undefined;
      // With a meter, a live step waits for a reading taken after the last step was acknowledged
      // (a step the device refused does not hold the next one up).
      if (
        meter &&
        !test &&
        dl &&
        !(dl.writes_failed > 0 && dl.writes_ok === 0) &&
        (dl.acked_at === undefined || ctx.seenAt(meter.device_id) <= dl.acked_at)
      )
        break;
      const measured = meter && !test ? meteredDrop(row, ctx, (id) => ctx.device(id)?.metrics)?.w : undefined;
      const drop = measured ?? p.shed_steps.reduce((sum, id) => sum + expected(p.devices[id]), 0);
      if (drop >= s.quantity_w) break;
      const at = order.findIndex((d) => !p.shed_steps.includes(d.device_id) && cap.free(d.device_id) && d.online && d.fully_configured);
      skipUnusable(row, order, at);
      // findIndex's -1 reads as undefined: no usable device is left.
      const next = order[at];
      if (next === undefined) break;
      const dp = deviceProgress(row, next.device_id);
      dp.skipped = undefined;
      dp.stepped_at = ctx.now;
      p.drop_before_step = drop;
      // A share is never more than the event's quantity, even when import rose since the baseline.
      step(next, dp, s.quantity_w - Math.max(0, drop), p.held?.[next.device_id]);
      p.shed_steps.push(next.device_id);
      claim(next);
      ctx.save(row);
      if (meter && !test) break;
    }
    return claims;
  },

  observe(row: EventRow, ctx: KindContext, metrics: ReadonlyMap<string, Record<string, number>>, ts: number): void {
    const p = row.progress;
    let estimate = 0;
    let estimated = false;
    for (const id of p.shed_steps) {
      const dp = p.devices[id];
      // Every step made its device's progress; a step without one has nothing to add.
      if (dp === undefined) continue;
      const own = ownDrop(dp, metrics.get(id)?.power_w);
      estimated ||= own.estimated;
      estimate += own.w;
      if (dp.writes_ok > 0) dp.mean = addSample(dp.mean, ts, own.w, ctx.hold);
    }
    if (!p.meter_id) {
      p.estimated ||= estimated;
      p.drop = addSample(p.drop, ts, estimate, ctx.hold);
      return;
    }
    noteOthers(row, ctx);
    const metered = meteredDrop(row, ctx, (id) => metrics.get(id));
    if (metered === undefined) return;
    p.estimated ||= metered.estimated;
    p.drop = addSample(p.drop, ts, metered.w, ctx.hold);
    // The drop a step brought: what the first reading after it adds.
    const last = p.shed_steps[p.shed_steps.length - 1];
    const dl = last ? p.devices[last] : undefined;
    if (dl && dl.drop_w === undefined && dl.acked_at !== undefined && ts > dl.acked_at)
      dl.drop_w = Math.max(0, metered.w - (p.drop_before_step ?? 0));
  },

  result(row: EventRow, ctx: KindContext, until: number): KindResult {
    const p = row.progress;
    const devices: DeviceEntry[] = [];
    for (const [id, dp] of Object.entries(p.devices).sort(([a], [b]) => byCodeUnit(a, b))) {
      const own = meanUntil(dp.mean, until, ctx.hold, p.window_from);
      // With a meter, a load without a meter of its own is credited with the drop the meter saw at its step.
      const dw = p.meter_id && dp.before_w === undefined ? (dp.drop_w ?? 0) : (own ?? 0);
      const touched = dp.writes_ok + dp.writes_failed > 0;
      let status: DeviceEntry["status"];
      if (!touched && dp.skipped) status = "skipped";
      else if (dp.writes_ok === 0) status = "failed";
      else {
        status = statusFor(dw, dp.requested_w);
        if (status === "completed" && dp.error) status = "partial";
      }
      const e: DeviceEntry = { device_id: id, status, requested_w: Math.round(dp.requested_w), delivered_w: Math.round(dw) };
      const err =
        dp.error ?? dp.skipped ?? (status === "failed" ? (dp.writes_ok ? "no drop measured after the step" : "not written") : undefined);
      if (err) e.error = err;
      devices.push(e);
    }
    const delivered = Math.max(0, meanUntil(p.drop, until, ctx.hold, p.window_from) ?? 0);
    return { delivered_w: delivered, devices, measured: !p.estimated, status: statusFor(delivered, row.spec.quantity_w) };
  },
};
