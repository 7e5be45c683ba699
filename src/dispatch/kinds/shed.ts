// shed: switchable loads, thermostats (set back) and curtailable PV, stepped in
// shed_priority order until the drop covers the quantity; the drop measured on the grid
// meter (less what other running events drive) or, without one, estimated. The rules of
// stepping and measuring: docs/dispatch.md (shed).
import { GENERATOR_ROLES, type Role } from "../../devices/roles.js";
import { statusFor, type DispatchDevice } from "../allocate.js";
import { addSample, meanUntil } from "../measure.js";
import type { EventType } from "../request.js";
import type { DeviceProgress, EventRow } from "../store.js";
import { byCodeUnit } from "../../util/compare.js";
import { deviceProgress, type Capacity, type Claim, type DeviceEntry, type EventKind, type KindContext, type KindResult } from "./kind.js";

/** How a shed takes one step on a device of a role: its action and what the step is expected to bring. */
interface ShedRole {
  /** A load turned down (a switch off, a thermostat set back), as opposed to curtailed PV. */
  load: boolean;
  /** Sets the step's expectations on its progress (requested, rated, before, pct). */
  step(d: DispatchDevice, dp: DeviceProgress, missing: number): void;
}

/** A switch: off; its metered power before, or its rated load that is on. */
const SWITCH: ShedRole = {
  load: true,
  step(d, dp, missing) {
    if (d.metrics.power_w !== undefined) dp.before_w = Math.max(0, d.metrics.power_w);
    dp.rated_w = ratedOn(d);
    dp.requested_w = Math.min(missing, expected(dp) || missing);
  },
};

/** A thermostat: set back by its setback_c; no meter shows that at once, so its share is its assumed rated power. */
const THERMOSTAT: ShedRole = {
  load: true,
  step(d, dp, missing) {
    const r = d.rated_power_w;
    dp.setback = true;
    dp.rated_w = (typeof r === "number" ? r : r?.reduce((a, b) => a + b, 0)) ?? d.max_power_w ?? 0;
    dp.requested_w = Math.min(missing, dp.rated_w || missing);
  },
};

/** Any other capable device is curtailable PV: limited by what is still missing, never by the whole quantity. */
const CURTAILED: ShedRole = {
  load: false,
  step(d, dp, missing) {
    const pv = Math.max(0, d.metrics.power_w ?? 0);
    dp.before_w = pv;
    dp.requested_w = Math.min(pv, missing);
    const limit = Math.max(0, pv - missing);
    dp.pct = Math.floor((limit / (d.max_power_w || pv || 1)) * 100);
  },
};

const SHED_ROLES: Partial<Record<Role, ShedRole>> = { switch: SWITCH, thermostat: THERMOSTAT };
const shedRole = (d: DispatchDevice): ShedRole => SHED_ROLES[d.role] ?? CURTAILED;
const isLoad = (d: DispatchDevice) => shedRole(d).load;

/** shed_priority of a device without one: loads (100) before curtailed PV (200). */
export const DEFAULT_SHED_PRIORITY = { load: 100, pv: 200 } as const;

const priorityOf = (d: DispatchDevice) => d.shed_priority ?? (isLoad(d) ? DEFAULT_SHED_PRIORITY.load : DEFAULT_SHED_PRIORITY.pv);

/** B4 shed order: shed_priority (lower first; default loads 100, PV 200), then device_id. */
export function shedOrder(a: DispatchDevice, b: DispatchDevice): number {
  const pa = priorityOf(a);
  const pb = priorityOf(b);
  return pa !== pb ? (pa < pb ? -1 : 1) : byCodeUnit(a.device_id, b.device_id);
}

/**
 * A switch's rated load that is on now: one number for the device, or the coils of a
 * per-coil list whose coil is closed (all of them when the device does not say which).
 */
export function ratedOn(d: DispatchDevice): number | undefined {
  const r = d.rated_power_w;
  if (r === undefined) return undefined;
  if (typeof r === "number") return r;
  const on = d.coils_on;
  return r.reduce((sum, w, i) => sum + (on === undefined || Math.floor(on / 2 ** i) % 2 === 1 ? w : 0), 0);
}

/** What a step is expected to bring, before any reading shows it (stepping without a meter). */
function expected(dp: DeviceProgress): number {
  return dp.before_w ?? dp.rated_w ?? 0;
}

/** The grid meter's drop now, less other events' changes (undefined without a reading). */
function meteredDrop(row: EventRow, ctx: KindContext, metrics: (id: string) => Record<string, number> | undefined): number | undefined {
  const p = row.progress;
  const g = p.meter_id ? metrics(p.meter_id)?.power_w : undefined;
  if (g === undefined || p.baseline_w === undefined) return undefined;
  let others = 0;
  for (const [id, base] of Object.entries(p.baselines ?? {})) {
    const by = ctx.drivers(id);
    if (by.length === 0 || by.includes(row.spec.event_id)) continue;
    const w = metrics(id)?.power_w;
    if (w === undefined) continue;
    const d = ctx.device(id);
    // A generator's rise lowers import; a load's rise raises it.
    others += (d && GENERATOR_ROLES.has(d.role) ? 1 : -1) * (w - base);
  }
  return p.baseline_w - g - others;
}

/** The assumed drop of the thermostats set back so far (their rated power; no meter shows a setback at once). */
function assumedSetback(row: EventRow): number {
  return Object.values(row.progress.devices).reduce((sum, dp) => sum + (dp.setback && dp.writes_ok > 0 ? (dp.rated_w ?? 0) : 0), 0);
}

/** A shed device's own drop now: metered (plug or PV) or its rated load once shed. */
function ownDrop(d: DispatchDevice | undefined, dp: DeviceProgress, w: number | undefined): { w: number; estimated: boolean } {
  if (dp.writes_ok === 0) return { w: 0, estimated: false };
  if (dp.before_w !== undefined && w !== undefined) return { w: Math.max(0, dp.before_w - w), estimated: false };
  if (d && isLoad(d) && dp.rated_w !== undefined) return { w: dp.rated_w, estimated: true };
  return { w: 0, estimated: true };
}

export const shed: EventKind = {
  types: ["shed"],

  capable(type: EventType, d: DispatchDevice): boolean {
    return type === "shed" && (d.capabilities.includes("curtail") || (d.capabilities.includes("shed") && isLoad(d)));
  },

  begin(row: EventRow, ctx: KindContext): void {
    const p = row.progress;
    const meter = ctx.gridMeter();
    if (!meter) return;
    p.meter_id = meter.device_id;
    p.baseline_w = ctx.baseline(meter.device_id, row.spec.start_ms) ?? meter.metrics.power_w;
    p.baselines = {};
    for (const d of ctx.devices) {
      if (d.device_id === meter.device_id || d.metrics.power_w === undefined) continue;
      p.baselines[d.device_id] = ctx.baseline(d.device_id, row.spec.start_ms) ?? d.metrics.power_w;
    }
  },

  plan(row: EventRow, ctx: KindContext, cap: Capacity): Claim[] {
    const s = row.spec;
    const p = row.progress;
    const test = s.mode === "test";
    const claims: Claim[] = [];
    const claim = (d: DispatchDevice, dp: DeviceProgress) => {
      cap.take(d.device_id, s.event_id, isLoad(d) ? "shed" : "curtail", 0, true);
      claims.push(isLoad(d) ? { device_id: d.device_id, action: "shed" } : { device_id: d.device_id, action: "curtail", pct: dp.pct ?? 0 });
    };
    for (const id of p.shed_steps) {
      const d = ctx.device(id);
      const dp = deviceProgress(row, id);
      if (!d) continue;
      if (cap.free(id)) {
        dp.skipped = undefined;
        claim(d, dp);
      } else dp.skipped = `driven by event ${cap.takenBy(id).join(", ")} (before this one in B4 order)`;
    }
    const order = ctx.devices.filter((d) => this.capable("shed", d) && d.fully_configured).sort(shedOrder);
    const meter = p.meter_id ? ctx.device(p.meter_id) : undefined;
    for (;;) {
      const next = order.find((d) => !p.shed_steps.includes(d.device_id) && cap.free(d.device_id) && d.online);
      if (!next) break;
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
      const measured = meter && !test ? meteredDrop(row, ctx, (id) => ctx.device(id)?.metrics) : undefined;
      const drop =
        measured !== undefined ? measured + assumedSetback(row) : p.shed_steps.reduce((sum, id) => sum + expected(p.devices[id]), 0);
      if (drop >= s.quantity_w) break;
      const missing = s.quantity_w - drop;
      const dp = deviceProgress(row, next.device_id);
      dp.skipped = undefined;
      dp.stepped_at = ctx.now;
      p.drop_before_step = drop;
      shedRole(next).step(next, dp, missing);
      p.shed_steps.push(next.device_id);
      claim(next, dp);
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
      const own = ownDrop(ctx.device(id), dp, metrics.get(id)?.power_w);
      if (own.estimated && own.w > 0) estimated = true;
      estimate += own.w;
      if (dp.writes_ok > 0) dp.mean = addSample(dp.mean, ts, own.w, ctx.hold);
    }
    if (p.meter_id) {
      const metered = meteredDrop(row, ctx, (id) => metrics.get(id));
      if (metered === undefined) return;
      const drop = metered + assumedSetback(row);
      p.drop = addSample(p.drop, ts, drop, ctx.hold);
      // The drop a step brought: what the first reading after it adds.
      const last = p.shed_steps[p.shed_steps.length - 1];
      const dl = last ? p.devices[last] : undefined;
      if (dl && dl.drop_w === undefined && dl.acked_at !== undefined && ts > dl.acked_at)
        dl.drop_w = Math.max(0, drop - (p.drop_before_step ?? 0));
    } else {
      p.estimated ||= estimated;
      p.drop = addSample(p.drop, ts, estimate, ctx.hold);
    }
  },

  result(row: EventRow, ctx: KindContext, until: number): KindResult {
    const p = row.progress;
    const devices: DeviceEntry[] = [];
    for (const [id, dp] of Object.entries(p.devices).sort(([a], [b]) => byCodeUnit(a, b))) {
      const own = meanUntil(dp.mean, until, ctx.hold, p.window_from);
      const dw = p.meter_id && dp.before_w === undefined && !dp.setback ? (dp.drop_w ?? 0) : (own ?? 0);
      const touched = dp.writes_ok + dp.writes_failed > 0;
      const status: DeviceEntry["status"] =
        !touched && dp.skipped ? "skipped" : dp.error ? (dp.writes_ok === 0 ? "failed" : "partial") : "completed";
      const e: DeviceEntry = { device_id: id, status, requested_w: Math.round(dp.requested_w), delivered_w: Math.round(dw) };
      const err = dp.error ?? dp.skipped;
      if (err) e.error = err;
      devices.push(e);
    }
    const delivered = Math.max(0, meanUntil(p.drop, until, ctx.hold, p.window_from) ?? 0);
    const assumed = Object.values(p.devices).some((dp) => dp.setback && dp.writes_ok > 0);
    const measured = (!!p.meter_id || !p.estimated) && !assumed;
    return { delivered_w: delivered, devices, measured, status: statusFor(delivered, row.spec.quantity_w) };
  },
};
