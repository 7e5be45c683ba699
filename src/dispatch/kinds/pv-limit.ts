// pv_limit (local only: a GPIO input's `on_active`, e.g. a grid operator's ripple-control
// receiver): every PV inverter capped at limit_pct of its rating while the event runs.
// It measures nothing for a partner (no execution response); its result lists each
// inverter and whether the cap was written.
import type { DispatchDevice } from "../allocate.js";
import type { EventType } from "../request.js";
import type { EventRow } from "../store.js";
import { byCodeUnit } from "../../util/compare.js";
import { deviceProgress, type Capacity, type Claim, type DeviceEntry, type EventKind, type KindContext, type KindResult } from "./kind.js";

export const pvLimit: EventKind = {
  types: ["pv_limit"],

  capable(type: EventType, d: DispatchDevice): boolean {
    return type === "pv_limit" && d.capabilities.includes("curtail");
  },

  plan(row: EventRow, ctx: KindContext, cap: Capacity): Claim[] {
    const s = row.spec;
    const pct = Math.max(0, Math.min(100, s.limit_pct ?? 100));
    const claims: Claim[] = [];
    for (const d of ctx.devices.filter((x) => this.capable("pv_limit", x)).sort((a, b) => byCodeUnit(a.device_id, b.device_id))) {
      const dp = deviceProgress(row, d.device_id);
      if (!d.fully_configured) dp.skipped = "not fully configured (REGISTRY_WRITE_FAILED)";
      else if (!cap.free(d.device_id)) dp.skipped = `driven by event ${cap.takenBy(d.device_id).join(", ")} (before this one in B4 order)`;
      else {
        dp.skipped = undefined;
        dp.pct = pct;
        dp.requested_w = ((d.max_power_w ?? 0) * pct) / 100;
        cap.take(d.device_id, s.event_id, "curtail", 0, true);
        claims.push({ device_id: d.device_id, action: "curtail", pct });
      }
    }
    return claims;
  },

  result(row: EventRow, _ctx: KindContext): KindResult {
    const devices: DeviceEntry[] = [];
    let failed = 0;
    for (const [id, dp] of Object.entries(row.progress.devices).sort(([a], [b]) => byCodeUnit(a, b))) {
      const ok = dp.writes_ok > 0;
      if (!ok && !dp.skipped) failed++;
      const e: DeviceEntry = {
        device_id: id,
        status: ok ? "completed" : dp.skipped && dp.writes_failed === 0 ? "skipped" : "failed",
        requested_w: Math.round(dp.requested_w),
        delivered_w: 0,
      };
      const err = dp.error ?? dp.skipped;
      if (err) e.error = err;
      devices.push(e);
    }
    const written = devices.filter((d) => d.status === "completed").length;
    return {
      delivered_w: 0,
      devices,
      measured: false,
      status: written === 0 ? "failed" : failed ? "partial" : "completed",
      details: { limit_pct: row.spec.limit_pct },
    };
  },
};
