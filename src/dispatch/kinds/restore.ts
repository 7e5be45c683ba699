// restore: ends every running shed (of its mode) whatever their priority, and puts back
// exactly what sheds changed: the devices the ledger holds for a shed go back to their
// pre-shed state through the ledger's release. It writes nothing of its own and switches
// on nothing that was off before the shed. A device counts as restored only once it reads
// back its pre-shed state; the result is `completed` when every such device does.
import { statusFor, type Planned } from "../allocate.js";
import type { EventType } from "../../model/vocabulary.js";
import { sheds } from "./shed.js";
import type { EventRow } from "../store.js";
import { byCodeUnit } from "../../util/compare.js";
import { deviceProgress, type Capacity, type Claim, type DeviceEntry, type EventKind, type KindContext, type KindResult } from "./kind.js";

// Only a shed writes `shed`; a PV limit (`curtail`) belongs to pv_limit, which a restore never ends.
const SHED_ACTIONS = new Set(["shed"]);
const verifying = new WeakMap<EventRow, Set<string>>();

export const restore: EventKind = {
  types: ["restore"],

  capable(type: EventType, d: Planned): boolean {
    // What a shed changed, a restore puts back: a device a shed can drive (a switch, a setpoint).
    return type === "restore" && sheds(d.device);
  },

  begin(row: EventRow, ctx: KindContext): void {
    const live = row.spec.mode === "live";
    const sheds = ctx.running().filter((r) => r.spec.event_type === "shed" && r.spec.mode === row.spec.mode && r.state === "running");
    // The targets: what the ledger holds for sheds (running or ended but not yet put back); test mode: what test sheds planned.
    if (live) {
      for (const l of ctx.ledgerRows()) {
        if (!l.actions.some((a) => SHED_ACTIONS.has(a))) continue;
        deviceProgress(row, l.device_id).pre = l.pre;
      }
    } else {
      for (const s of sheds) for (const id of ctx.claimedBy(s.spec.event_id)) deviceProgress(row, id).pre = null; // test mode: nothing was written, nothing is held
    }
    for (const s of sheds) ctx.end(s, `ended by restore ${row.spec.event_id}`);
    const ids = Object.keys(row.progress.devices);
    for (const id of ids) deviceProgress(row, id).requested_w = ids.length ? row.spec.quantity_w / ids.length : 0;
    ctx.save(row);
  },

  plan(_row: EventRow, _ctx: KindContext, _cap: Capacity): Claim[] {
    return [];
  },

  observe(row: EventRow, ctx: KindContext): void {
    const busy = verifying.get(row) ?? new Set<string>();
    verifying.set(row, busy);
    for (const [id, dp] of Object.entries(row.progress.devices)) {
      if (dp.restored || dp.pre === undefined || busy.has(id)) continue;
      const l = ctx.ledger(id);
      if (l && l.holders.some((h) => ctx.running().some((r) => r.spec.event_id === h))) {
        dp.error = `driven again by event ${l.holders.join(", ")}`;
        continue;
      }
      if (l) {
        // The release is still under way, or did not read back and is retried with backoff.
        if (l.unreleased !== undefined) dp.error = l.unreleased;
        continue;
      }
      busy.add(id);
      ctx.verify(id, dp.pre, (mismatch) => {
        busy.delete(id);
        dp.restored = mismatch === undefined;
        dp.error = mismatch;
        if (dp.restored) ctx.save(row);
      });
    }
  },

  driving(): boolean {
    return true;
  },

  // A test restore ends the test sheds and reports the devices they planned as restored:
  // its own result, not a plan (it plans nothing).
  testResult(row: EventRow, ctx: KindContext): KindResult {
    return { ...this.result(row, ctx, ctx.now), coverage: 1 };
  },

  result(row: EventRow, ctx: KindContext, _until?: number): KindResult {
    const s = row.spec;
    const test = s.mode === "test";
    const devices: DeviceEntry[] = [];
    let ok = 0;
    for (const [id, dp] of Object.entries(row.progress.devices).sort(([a], [b]) => byCodeUnit(a, b))) {
      const done = test || dp.restored === true;
      if (done) ok++;
      const e: DeviceEntry = {
        device_id: id,
        status: done ? "completed" : "failed",
        requested_w: Math.round(dp.requested_w),
        delivered_w: done ? Math.round(dp.requested_w) : 0,
      };
      if (!done) e.error = dp.error ?? (ctx.ledger(id) ? "not put back yet (release pending)" : "did not read back its pre-shed state");
      devices.push(e);
    }
    const n = devices.length;
    const delivered = n ? (s.quantity_w * ok) / n : s.quantity_w;
    const status = n === 0 ? "completed" : ok === n ? "completed" : ok === 0 ? "failed" : "partial";
    return {
      delivered_w: delivered,
      devices,
      measured: true,
      status: s.quantity_w > 0 ? (statusFor(delivered, s.quantity_w) === "completed" && ok < n ? "partial" : status) : status,
    };
  },
};
