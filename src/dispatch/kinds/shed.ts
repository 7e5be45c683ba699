// shed: loads only (switchable loads off, thermostats set back), stepped in shed_priority
// order until the drop covers the quantity. Never PV or a battery: curtailing PV raises
// grid import, the opposite of a shed. The drop is the site's consumption against the last
// quiet minute before the start, capped by what the loads it still drives account for
// (shed-measure.ts) or, without a meter or a quiet minute, estimated from each load once. A
// load that does not follow its write brings nothing, and the shed moves on. The rules of
// stepping and measuring: docs/dispatch.md (shed).
import type { Role } from "../../model/roles.js";
import type { Device } from "../../model/device.js";
import { statusFor, type Planned } from "../allocate.js";
import { addSample, meanUntil } from "../measure.js";
import type { EventType } from "../../model/vocabulary.js";
import type { DeviceProgress, EventRow, StepExpectation } from "../store.js";
import { byCodeUnit } from "../../util/compare.js";
import { deviceProgress, type Capacity, type Claim, type DeviceEntry, type EventKind, type KindContext, type KindResult } from "./kind.js";
import {
  account,
  expected,
  failedStep,
  meteredDrop,
  noteOthers,
  ownDrop,
  ratedOn,
  ratedTotal,
  readingAt,
  shedSample,
  type Reading,
} from "./shed-measure.js";

/** The roles a shed turns down: a switch goes off, a thermostat is set back by its setback_c. */
const LOAD_ROLES: ReadonlySet<Role> = new Set(["switch", "thermostat"]);
const isLoad = (d: Planned) => LOAD_ROLES.has(d.descriptor.role);

/** Whether a shed can drive the device: it switches a load off or sets a heating setpoint back. */
export const sheds = (d: Pick<Device, "switch" | "setpoint">): boolean => d.switch !== undefined || d.setpoint !== undefined;

/** shed_priority of a device without one. */
export const DEFAULT_SHED_PRIORITY = 100;

/** B4 shed order: shed_priority (lower first; default 100), then device_id. */
export function shedOrder(a: Planned, b: Planned): number {
  const pa = a.device.info().shed_priority ?? DEFAULT_SHED_PRIORITY;
  const pb = b.device.info().shed_priority ?? DEFAULT_SHED_PRIORITY;
  return pa !== pb ? (pa < pb ? -1 : 1) : byCodeUnit(a.device.id, b.device.id);
}

/**
 * A step's expectations: the load's own power before it (metered plug or thermostat), else
 * its rating. A load taken over from another shed is off already: it brings what it brought
 * that shed (`held`), not what it reads now.
 */
function step(d: Planned, dp: DeviceProgress, missing: number, held: StepExpectation | undefined): void {
  if (held) {
    dp.before_w = held.before_w;
    dp.rated_w = held.rated_w;
  } else {
    dp.before_w = d.metrics.power_w !== undefined ? Math.max(0, d.metrics.power_w) : undefined;
    dp.rated_w = d.descriptor.role === "thermostat" ? ratedTotal(d) : ratedOn(d);
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
    const id = d.device.id;
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

/** Marks the devices the shed would use next but cannot (offline, not fully configured) as skipped. */
function skipUnusable(row: EventRow, order: readonly Planned[], upTo: number): void {
  for (const d of upTo < 0 ? order : order.slice(0, upTo)) {
    if (row.progress.shed_steps.includes(d.device.id) || (d.online && d.device.info().fully_configured)) continue;
    const dp = deviceProgress(row, d.device.id);
    if (dp.writes_ok + dp.writes_failed === 0)
      dp.skipped = d.blocked ?? (d.device.info().fully_configured ? "offline" : "not fully configured (REGISTRY_WRITE_FAILED)");
  }
}

/**
 * The drop a shed's stepping goes by: with a meter (live), what the loads it drives account
 * for (while one is not accounted for yet, the measured drop capped by them), and the
 * meter's own, uncapped, for the next step's drop_w;
 * otherwise what the steps it still holds are expected to bring (a step the device did not
 * follow brings nothing: the shed moves on).
 */
function dropNow(row: EventRow, ctx: KindContext, kept: ReadonlySet<string>, metered: boolean): { drop: number; uncapped: number } {
  const p = row.progress;
  if (metered) {
    const read: Reading = (id) => (ctx.fresh(id, ctx.now) ? ctx.device(id)?.metrics : undefined);
    const m = meteredDrop(row, ctx, read);
    const acc = account(row, ctx, read);
    const drop = shedSample(row, m, acc).w;
    // Once every load it drives is accounted for, the stepping goes by them: a house-load rise
    // (a step the shed did not make) is never chased with another load (B4).
    return { drop: acc.unknown ? drop : acc.measured + acc.other, uncapped: m && !m.stale ? m.w : drop };
  }
  const drop = p.shed_steps.reduce((sum, id) => sum + (kept.has(id) && !failedStep(p.devices[id]) ? expected(p.devices[id]) : 0), 0);
  return { drop, uncapped: drop };
}

/** Fresh meter readings a step's drop is averaged over (the house load's noise is in each one). */
const STEP_READINGS = 5;

/**
 * The drop the last step brought: the mean of the first fresh readings after it was read
 * back (at most STEP_READINGS) less the mean of the readings before it (since the step
 * before was read back). A load without a rating or a meter of its own is accounted for by it.
 */
function noteStepDrop(row: EventRow, w: number, ts: number): void {
  const p = row.progress;
  const last = p.shed_steps[p.shed_steps.length - 1];
  const dl = last ? p.devices[last] : undefined;
  if (dl && !(dl.writes_ok > 0 && dl.acked_at !== undefined && ts > dl.acked_at)) return; // its effect not read back yet
  if (dl && (dl.drop_n ?? 0) < STEP_READINGS) {
    dl.drop_n = (dl.drop_n ?? 0) + 1;
    dl.drop_sum = (dl.drop_sum ?? 0) + w - (p.drop_before_step ?? 0);
    dl.drop_w = Math.max(0, dl.drop_sum / dl.drop_n);
  }
  p.recent_drops = [...(p.recent_drops ?? []), w].slice(-STEP_READINGS);
}

export const shed: EventKind = {
  types: ["shed"],

  capable(type: EventType, d: Planned): boolean {
    return type === "shed" && sheds(d.device) && isLoad(d);
  },

  begin(row: EventRow, ctx: KindContext): void {
    const p = row.progress;
    noteHeld(row, ctx);
    const meter = ctx.gridMeter();
    const quiet = ctx.quietUntil(row.spec.start_ms);
    const base = meter && quiet !== undefined ? ctx.baseline(meter.device.id, quiet) : undefined;
    // No meter, or no quiet minute to compare with: the drop is estimated from the loads.
    if (!meter || quiet === undefined || base === undefined) return;
    p.meter_id = meter.device.id;
    p.baseline_w = base;
    p.baselines = {};
    for (const d of ctx.devices) {
      if (d.device.id === meter.device.id) continue;
      const b = ctx.baseline(d.device.id, quiet);
      if (b !== undefined) p.baselines[d.device.id] = b;
    }
    noteOthers(row, ctx);
  },

  plan(row: EventRow, ctx: KindContext, cap: Capacity): Claim[] {
    const s = row.spec;
    const p = row.progress;
    const test = s.mode === "test";
    const claims: Claim[] = [];
    const claim = (d: Planned) => {
      cap.take(d.device.id, s.event_id, "shed", 0, true);
      claims.push({ device_id: d.device.id, action: "shed" });
    };
    noteHeld(row, ctx);
    const kept = new Set<string>();
    for (const id of p.shed_steps) {
      const d = ctx.device(id);
      const dp = deviceProgress(row, id);
      if (!d) continue;
      if (cap.free(id)) {
        dp.skipped = undefined;
        kept.add(id);
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
        (dl.acked_at === undefined || ctx.seenAt(meter.device.id) <= dl.acked_at)
      )
        break;
      const { drop, uncapped } = dropNow(row, ctx, kept, meter !== undefined && !test);
      if (drop >= s.quantity_w) break;
      const at = order.findIndex(
        (d) => !p.shed_steps.includes(d.device.id) && cap.free(d.device.id) && d.online && d.device.info().fully_configured,
      );
      skipUnusable(row, order, at);
      // findIndex's -1 reads as undefined: no usable device is left.
      const next = order[at];
      if (next === undefined) break;
      const dp = deviceProgress(row, next.device.id);
      dp.skipped = undefined;
      dp.stepped_at = ctx.now;
      p.drop_before_step = p.recent_drops?.length ? p.recent_drops.reduce((a, b) => a + b, 0) / p.recent_drops.length : uncapped;
      p.recent_drops = [];
      // A share is never more than the event's quantity, even when import rose since the baseline.
      step(next, dp, s.quantity_w - Math.max(0, drop), p.held?.[next.device.id]);
      p.shed_steps.push(next.device.id);
      kept.add(next.device.id);
      claim(next);
      ctx.save(row);
      if (meter && !test) break;
    }
    return claims;
  },

  observe(row: EventRow, ctx: KindContext, metrics: ReadonlyMap<string, Record<string, number>>, ts: number): void {
    const p = row.progress;
    const read = readingAt(ctx, metrics, ts);
    for (const id of p.shed_steps) {
      const dp = p.devices[id];
      // A load's own mean: what it brings while this shed drives it (0 once another took it over).
      if (dp !== undefined && dp.writes_ok > 0)
        dp.mean = addSample(dp.mean, ts, ownDrop(row, ctx, id, read)?.w ?? 0, ctx.hold, p.resumed_at);
    }
    let metered: ReturnType<typeof meteredDrop>;
    if (p.meter_id) {
      noteOthers(row, ctx);
      metered = meteredDrop(row, ctx, read);
      if (metered && !metered.stale) noteStepDrop(row, metered.w, ts);
    }
    const sample = shedSample(row, metered, account(row, ctx, read));
    p.estimated ||= sample.estimated;
    p.drop = addSample(p.drop, ts, sample.w, ctx.hold, p.resumed_at);
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
      // The status follows the quantity alone (B4); a device's error still shows in `error`.
      else status = statusFor(dw, dp.requested_w);
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
