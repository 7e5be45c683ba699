// charge / discharge: battery inverters, split in proportion to their maximum power and
// capped at what earlier events (B4 order) left of each; a battery carries the sum of the
// shares of every event of the same direction (stacking). Measured from each battery's AC
// power, in this event's fraction of the setpoint written to it. Beside it, the effect at the
// grid (`site_effect_w`, B4): the undisturbed baseline's import less the mean import over
// the window, from fresh meter readings only, so a partner sees when a forced mode displaced
// the battery's own self-consumption.
import { allocateProportional, pctOf, statusFor, type Planned } from "../allocate.js";
import { addHeld, addSample, heldMean, meanUntil } from "../measure.js";
import type { EventType } from "../../model/vocabulary.js";
import { takes } from "../../model/device.js";
import type { EventRow } from "../store.js";
import { byCodeUnit } from "../../util/compare.js";
import { deviceProgress, type Capacity, type Claim, type DeviceEntry, type EventKind, type KindContext, type KindResult } from "./kind.js";

export const chargeDischarge: EventKind = {
  types: ["charge", "discharge"],

  capable(type: EventType, d: Planned): boolean {
    return (type === "charge" || type === "discharge") && takes(d.device.power, type);
  },

  begin(row: EventRow, ctx: KindContext): void {
    const meter = ctx.gridMeter();
    const quiet = ctx.quietUntil(row.spec.start_ms);
    const base = meter && quiet !== undefined ? ctx.baseline(meter.device.id, quiet) : undefined;
    if (!meter || base === undefined) return;
    row.progress.meter_id = meter.device.id;
    row.progress.baseline_w = base;
  },

  plan(row: EventRow, ctx: KindContext, cap: Capacity): Claim[] {
    const s = row.spec;
    const type = s.event_type as "charge" | "discharge";
    const capable = ctx.devices.filter((d) => this.capable(type, d));
    for (const d of capable)
      if (!d.device.info().fully_configured) deviceProgress(row, d.device.id).skipped = "not fully configured (REGISTRY_WRITE_FAILED)";
    const usable = capable.filter((d) => d.device.info().fully_configured);
    const claims: Claim[] = [];
    for (const sh of allocateProportional(type, s.quantity_w, usable, (d) => cap.left(d, type))) {
      const dp = deviceProgress(row, sh.device_id);
      const others = cap.takenBy(sh.device_id);
      dp.skipped =
        sh.skipped && others.length && sh.reason !== "unavailable"
          ? `driven by event ${others.join(", ")} (before this one in B4 order)`
          : sh.skipped;
      if (sh.skipped) continue;
      dp.requested_w = sh.watts;
      const d = usable.find((x) => x.device.id === sh.device_id)!;
      cap.take(d.device.id, s.event_id, type, sh.watts, false);
      claims.push({ device_id: d.device.id, action: type, watts: sh.watts, pct: pctOf(sh.watts, d.descriptor.max_power_w!) });
    }
    return claims;
  },

  observe(row: EventRow, ctx: KindContext, metrics: ReadonlyMap<string, Record<string, number>>, ts: number): void {
    for (const id of Object.keys(row.progress.devices)) {
      const m = metrics.get(id);
      if (m) sample(row, ctx, id, m, ts);
      else silenced(row, ctx, id, ts);
    }
    const p = row.progress;
    // Only a fresh reading of the meter: a stale one never enters a measurement.
    const g = p.meter_id && ctx.fresh(p.meter_id, ts) ? (metrics.get(p.meter_id) ?? ctx.device(p.meter_id)?.metrics)?.power_w : undefined;
    if (g !== undefined) p.site = addHeld(p.site, ts, g, ctx.hold);
  },

  // Each battery's mean is its own time-weighted series, so a confirmation reading is one
  // more sample of it: it ends the previous sample's hold at the moment the setpoint was
  // seen instead of at the next poll. Nothing is counted twice: every instant of the window
  // is covered by exactly one sample, and a later snapshot stamped with an earlier tick
  // (a poll under way during the write) is dropped by addSample.
  confirmed(row: EventRow, ctx: KindContext, deviceId: string, metrics: Readonly<Record<string, number>>, at: number): void {
    if (row.progress.devices[deviceId]) sample(row, ctx, deviceId, metrics, at);
  },

  result(row: EventRow, ctx: KindContext, until: number): KindResult {
    const p = row.progress;
    const devices: DeviceEntry[] = [];
    let delivered = 0;
    for (const [id, dp] of Object.entries(p.devices).sort(([a], [b]) => byCodeUnit(a, b))) {
      // A battery that never took its setpoint delivered nothing for the event, whatever it did on its own (B4 closed loop).
      const never = dp.error !== undefined && dp.writes_ok === 0;
      const dw = never ? 0 : (meanUntil(dp.mean, until, ctx.hold, p.window_from) ?? 0);
      const touched = dp.writes_ok + dp.writes_failed > 0;
      let status: DeviceEntry["status"];
      if (!touched && dp.skipped) status = "skipped";
      else if (never) status = "failed";
      else status = statusFor(dw, dp.requested_w);
      const e: DeviceEntry = { device_id: id, status, requested_w: Math.round(dp.requested_w), delivered_w: Math.round(dw) };
      const err = dp.error ?? dp.skipped ?? (status === "failed" ? "measured no power in the event's direction" : undefined);
      if (err) e.error = err;
      devices.push(e);
      delivered += Math.max(0, dw);
    }
    const site = heldMean(p.site, until, ctx.hold);
    const effect = p.baseline_w !== undefined && site !== undefined ? { site_effect_w: Math.round(p.baseline_w - site) } : undefined;
    return { delivered_w: delivered, devices, measured: !p.stale, ...(effect ? { details: effect } : {}) };
  },
};

/** One reading of a battery's AC power as a sample of this event's delivery. */
function sample(row: EventRow, ctx: KindContext, id: string, m: Readonly<Record<string, number>> | undefined, ts: number): void {
  const s = row.spec;
  const dp = row.progress.devices[id];
  const w = m?.power_w;
  if (!dp || !m || w === undefined || (dp.requested_w <= 0 && !dp.mean)) return;
  // A battery shared by several events delivers for each its fraction of the setpoint;
  // one another event has taken over delivers nothing for this one.
  // Before its setpoint read back the battery is on its own (a hybrid self-consumes): none of that is the event's;
  // nor once it reads back on its own control (its revert timer ran out while it ignored or refused the re-asserts).
  const own = ctx.device(id)?.device.power?.showsForced?.(s.event_type as "charge" | "discharge", m) === false;
  const part = !own && dp.acked_at !== undefined && ts >= dp.acked_at ? ctx.share(id, s.event_id) : 0;
  const was = dp.mean;
  dp.mean = addSample(was, ts, part * (s.event_type === "discharge" ? w : -w), ctx.hold, row.progress.resumed_at);
  // The first reading that shows the battery delivering for the event is committed at once:
  // a crash before the next periodic save still knows it held its setpoint, so the restart
  // gap counts what it reads back (a battery that took its setpoint 6 s before a crash, in
  // an event already driven, had been credited nothing for a 25 s gap; soak 918273645 #9957).
  if (!was?.value && !was?.area && dp.mean.value !== 0) ctx.save(row);
}

/**
 * A battery this event measures found offline (no reading in the snapshot, and its device
 * says offline): its last reading is stale from now on and holds no longer (B4: a stale
 * reading never enters a measurement). Until it answers again it counts as delivering
 * nothing for the event, whatever it may go on doing unseen, and the event says
 * `measured: false`. Committed at once: a crash soon after must not find the stale reading
 * still open and let the read-back after the restart stand for the whole gap since it.
 */
function silenced(row: EventRow, ctx: KindContext, id: string, ts: number): void {
  const p = row.progress;
  const dp = p.devices[id];
  if (!dp?.mean || ctx.device(id)?.online !== false) return;
  const known = p.stale === true && dp.mean.value === 0;
  p.stale = true;
  if (known) return;
  dp.mean = addSample(dp.mean, ts, 0, ctx.hold, p.resumed_at);
  ctx.save(row);
}
