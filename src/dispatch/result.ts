// An event's execution response (B4): the fields every kind shares, around what the
// event's kind measured (or, for a test event, what it planned).
import { statusFor, type Planned, type ResultStatus } from "./allocate.js";
import { meanUntil } from "./measure.js";
import { fromWatts } from "./request.js";
import { kindOf } from "./kinds/index.js";
import { plannedResult, type KindContext } from "./kinds/kind.js";
import type { EventRow } from "./store.js";

export interface ExecutionResponse {
  event_id: string;
  status: ResultStatus;
  timestamp: string;
  details: Record<string, unknown>;
}

/** The response of `row` measured until `until`; `devs` are the devices of the last plan. */
export function executionResponse(
  row: EventRow,
  ctx: KindContext,
  devs: readonly Planned[],
  at: { until: number; cancelled: boolean; now: number },
): ExecutionResponse {
  const { until, cancelled, now } = at;
  const s = row.spec;
  const p = row.progress;
  const kind = kindOf(s.event_type);
  const test = s.mode === "test";
  const base = { mode: s.mode, requested_quantity: s.quantity, unit: s.unit, cancelled, ...(p.ended_by ? { ended_by: p.ended_by } : {}) };
  const respond = (status: ResultStatus, delivered: number, extra: Record<string, unknown>): ExecutionResponse => ({
    event_id: s.event_id,
    status,
    timestamp: new Date(now).toISOString(),
    details: { ...base, delivered_quantity: fromWatts(delivered, s.unit), ...extra },
  });
  const capable = devs.filter((d) => kind.capable(s.event_type, d) && d.device.info().fully_configured);
  if (capable.length === 0 && Object.keys(p.devices).length === 0) {
    return respond("failed", 0, { measured: false, coverage: 0, reason: "no_capable_device", devices: [] });
  }
  const planned = () => (kind.testResult ? kind.testResult(row, ctx, until) : plannedResult(row));
  const r = test ? planned() : kind.result(row, ctx, until);
  // B4: the event's status follows its delivered quantity alone; a device that failed shows in `devices`.
  const status = r.status ?? statusFor(r.delivered_w, s.quantity_w);
  const measured = () => Math.round((meanUntil(p.driven, until, ctx.hold, p.window_from) ?? 0) * 1000) / 1000;
  const coverage = r.coverage ?? (test ? 1 : measured());
  const gaps = p.gaps?.length
    ? { gaps: p.gaps.map((g) => ({ from: new Date(g.from).toISOString(), to: new Date(g.to).toISOString() })) }
    : {};
  return respond(status, r.delivered_w, {
    measured: !test && r.measured && !p.gap_unmeasured,
    coverage,
    ...gaps,
    ...(r.details ?? {}),
    devices: r.devices,
  });
}

/** The response of an event that ended while the gateway was down: never run late (B4). */
export function missedResponse(s: EventRow["spec"], now: number): ExecutionResponse {
  return {
    event_id: s.event_id,
    status: "failed",
    timestamp: new Date(now).toISOString(),
    details: {
      mode: s.mode,
      requested_quantity: s.quantity,
      delivered_quantity: 0,
      unit: s.unit,
      cancelled: false,
      measured: false,
      reason: "missed",
      devices: [],
    },
  };
}
