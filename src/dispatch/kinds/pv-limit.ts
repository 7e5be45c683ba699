// pv_limit (local only: a GPIO input's `on_active`, e.g. a grid operator's ripple-control
// receiver): every PV inverter capped at limit_pct of its rating while the event runs.
// It sends no execution response; its delivery is PV's own drop (each inverter's power
// against its power before the cap), and its result lists each inverter and whether the
// cap was written.
import type { Planned } from "../allocate.js";
import { addSample, meanUntil } from "../measure.js";
import type { EventType } from "../../model/vocabulary.js";
import type { EventRow } from "../store.js";
import { byCodeUnit } from "../../util/compare.js";
import { deviceProgress, type Capacity, type Claim, type DeviceEntry, type EventKind, type KindContext, type KindResult } from "./kind.js";

export const pvLimit: EventKind = {
  types: ["pv_limit"],

  capable(type: EventType, d: Planned): boolean {
    return type === "pv_limit" && d.device.curtail !== undefined;
  },

  begin(row: EventRow, ctx: KindContext): void {
    const quiet = ctx.quietUntil(row.spec.start_ms);
    for (const d of ctx.devices.filter((x) => this.capable("pv_limit", x))) {
      const before = (quiet !== undefined ? ctx.baseline(d.device.id, quiet) : undefined) ?? d.metrics.power_w;
      if (before !== undefined) deviceProgress(row, d.device.id).before_w = Math.max(0, before);
    }
  },

  observe(row: EventRow, ctx: KindContext, metrics: ReadonlyMap<string, Record<string, number>>, ts: number): void {
    let total = 0;
    for (const [id, dp] of Object.entries(row.progress.devices)) {
      const w = metrics.get(id)?.power_w;
      if (dp.writes_ok === 0 || dp.before_w === undefined || w === undefined) continue;
      const drop = Math.max(0, dp.before_w - w);
      dp.mean = addSample(dp.mean, ts, drop, ctx.hold, row.progress.resumed_at);
      total += drop;
    }
    row.progress.drop = addSample(row.progress.drop, ts, total, ctx.hold, row.progress.resumed_at);
  },

  plan(row: EventRow, ctx: KindContext, cap: Capacity): Claim[] {
    const s = row.spec;
    const pct = Math.max(0, Math.min(100, s.limit_pct ?? 100));
    const claims: Claim[] = [];
    for (const d of ctx.devices.filter((x) => this.capable("pv_limit", x)).sort((a, b) => byCodeUnit(a.device.id, b.device.id))) {
      const dp = deviceProgress(row, d.device.id);
      if (!d.device.info().fully_configured) dp.skipped = "not fully configured (REGISTRY_WRITE_FAILED)";
      else if (d.blocked) dp.skipped = d.blocked;
      else if (!cap.free(d.device.id)) dp.skipped = `driven by event ${cap.takenBy(d.device.id).join(", ")} (before this one in B4 order)`;
      else {
        dp.skipped = undefined;
        dp.pct = pct;
        dp.requested_w = ((d.descriptor.max_power_w ?? 0) * pct) / 100;
        cap.take(d.device.id, s.event_id, "curtail", 0, true);
        claims.push({ device_id: d.device.id, action: "curtail", pct });
      }
    }
    return claims;
  },

  result(row: EventRow, ctx: KindContext, until: number): KindResult {
    const p = row.progress;
    const devices: DeviceEntry[] = [];
    let failed = 0;
    for (const [id, dp] of Object.entries(row.progress.devices).sort(([a], [b]) => byCodeUnit(a, b))) {
      const ok = dp.writes_ok > 0;
      if (!ok && !dp.skipped) failed++;
      const e: DeviceEntry = {
        device_id: id,
        status: ok ? "completed" : dp.skipped && dp.writes_failed === 0 ? "skipped" : "failed",
        requested_w: Math.round(dp.requested_w),
        delivered_w: Math.round(meanUntil(dp.mean, until, ctx.hold, p.window_from) ?? 0),
      };
      const err = dp.error ?? dp.skipped;
      if (err) e.error = err;
      devices.push(e);
    }
    const written = devices.filter((d) => d.status === "completed").length;
    return {
      delivered_w: Math.max(0, meanUntil(p.drop, until, ctx.hold, p.window_from) ?? 0),
      devices,
      measured: true,
      status: written === 0 ? "failed" : failed ? "partial" : "completed",
      details: { limit_pct: row.spec.limit_pct },
    };
  },
};
