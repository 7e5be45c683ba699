// The dispatcher: receipts, the durable timeline and the execution of events on the
// devices. Driven by timers at the boundaries of events (never a polling loop) and by
// telemetry snapshots, which carry the measurements. Every state change is committed to
// SQLite before it is answered or acted on; the execution response goes into the outbox
// in the same transaction that ends the event, so it exists exactly once.
import { SitegateError, errorMessage } from "../errors.js";
import type { Logger } from "../log.js";
import type { Part } from "../lifecycle.js";
import type { Db } from "../storage/db.js";
import type { ActionName } from "../profiles/schema.js";
import type { Snapshot } from "../telemetry/types.js";
import {
  METER_TYPE, SWITCH_TYPES, allocateProportional, assignDevices, canDrive, gridMeterOrder, pctOf, statusFor,
  type DispatchDevice, type ResultStatus,
} from "./allocate.js";
import type { Clock } from "../util/clock.js";
import { RollingWindow, addSample, meanUntil } from "./measure.js";
import { contentHash, fromWatts, toSpec, type DispatchRequest, type EventSpec } from "./request.js";
import { EventStore, emptyProgress, type DeviceProgress, type EventRow } from "./store.js";
import { Timeline } from "./timeline.js";
import { byCodeUnit } from "../util/compare.js";

/** What the dispatcher needs of the device layer (capabilities, not models). */
export interface DeviceControl {
  /** Every registered device with a descriptor, fully configured or not. */
  devices(): DispatchDevice[];
  /** Writes the profile's action; throws a SitegateError when the device refuses. */
  apply(deviceId: string, action: ActionName, params: { pct?: number; watts?: number }): Promise<void>;
  hasAction(deviceId: string, action: ActionName): boolean;
  /** ms between rewrites of an active setpoint (0: the device holds it). */
  refreshMs(deviceId: string): number;
  setRemote(deviceId: string, remote: boolean): void;
}

export interface Receipt {
  event_id: string;
  status: "accepted" | "cancelled";
}

export interface DispatcherDeps {
  db: () => Db;
  control: DeviceControl;
  clock: Clock;
  log: Logger;
  pollIntervalMs: number;
  /** Commits the execution response to the outbox; called inside the transaction that ends the event. */
  respond: (event: EventSpec, body: ExecutionResponse) => void;
  /** Told of every state an event enters, inside the transaction that commits it (the fleet uplink's `events`). */
  onState?: (event: EventSpec, state: EventRow["state"], at: number) => void;
}

export interface ExecutionResponse {
  event_id: string;
  status: ResultStatus;
  timestamp: string;
  details: Record<string, unknown>;
}

interface Staged {
  receipts: Receipt[];
  touched: EventRow[];
  stopRunning: EventRow[];
}

interface Applied {
  event_id: string;
  key: string;
  at: number;
  failed: boolean;
}

const STEP_CHECK_MS = 5000;
const CLOCK_STEP_MS = 2000;
const MAX_TIMER_MS = 60_000;
const RETRY_FAILED_WRITE_MS = 5000;
const PROGRESS_SAVE_MS = 10_000;
const HISTORY_DAYS = 30;

export class Dispatcher implements Part {
  readonly name = "dispatch";
  private store!: EventStore;
  private readonly open = new Timeline();
  private readonly applied = new Map<string, Applied>();
  private readonly chains = new Map<string, Promise<void>>();
  private readonly meters = new Map<string, RollingWindow>();
  private readonly seenAt = new Map<string, number>();
  /** device_id -> event_id of the last assignment. */
  private assigned = new Map<string, string>();
  private batch: Array<{ req: DispatchRequest; resolve: (r: Receipt[]) => void; reject: (e: unknown) => void }> = [];
  private timer: unknown = null;
  private watch: unknown = null;
  private offset = 0;
  private stopped = true;
  private lastSave = 0;
  readonly stats = { writes_ok: 0, writes_failed: 0, started: 0, finished: 0, missed: 0, clock_steps: 0, receipt_commits: 0, receipt_requests: 0 };

  constructor(private readonly deps: DispatcherDeps) {}

  /**
   * How long a sample stands for its device: two poll intervals, and at least 5 s, since a
   * bus that waits out another device's timeout polls late without anything being wrong.
   */
  private get hold(): number {
    return Math.max(2 * this.deps.pollIntervalMs, 5000);
  }

  start(): void {
    this.store = new EventStore(this.deps.db());
    this.stopped = false;
    const now = this.deps.clock.now();
    this.store.sweep(now - HISTORY_DAYS * 86_400_000);
    for (const row of this.store.open()) this.open.put(row);
    this.offset = now - this.deps.clock.mono();
    const watch = () => {
      if (this.stopped) return;
      const off = this.deps.clock.now() - this.deps.clock.mono();
      if (Math.abs(off - this.offset) > CLOCK_STEP_MS) {
        this.stats.clock_steps++;
        this.deps.log.warn({ step_ms: Math.round(off - this.offset) }, "wall clock stepped; planning the timeline again");
        this.offset = off;
        this.replan();
      }
      this.watch = this.deps.clock.setTimer(watch, STEP_CHECK_MS);
    };
    this.watch = this.deps.clock.setTimer(watch, STEP_CHECK_MS);
    if (this.open.size) this.deps.log.info({ open_events: this.open.size }, "dispatch timeline loaded");
    this.replan();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== null) this.deps.clock.clearTimer(this.timer);
    if (this.watch !== null) this.deps.clock.clearTimer(this.watch);
    this.timer = this.watch = null;
    // Setpoints stay with the device until its own revert timeout; a restart resumes.
    const now = this.deps.clock.now();
    for (const row of this.open.running.values()) this.store.saveProgress(row, now);
    await Promise.allSettled([...this.chains.values()]);
  }

  // ---- receipts ----

  /**
   * Validated request -> receipts, committed (synchronous=FULL) before they are returned.
   * Throws INVALID_REQUEST (end_time in the past for a new or changed event) or CONFLICT
   * (a change after start); then nothing of the request is stored.
   */
  submit(req: DispatchRequest): Receipt[] {
    const now = this.deps.clock.now();
    let staged!: Staged;
    withFullSync(this.store.db, this.store.db.transaction(() => (staged = this.stage(req, now))));
    this.applyStaged(staged, now);
    this.replan();
    return staged.receipts;
  }

  /**
   * The same as submit(), with group commit: the requests that arrive in one turn of the
   * event loop share one transaction and one fsync, each in a savepoint of its own, so
   * one request's 409 or 400 never touches another's receipts.
   */
  submitBatched(req: DispatchRequest): Promise<Receipt[]> {
    return new Promise((resolve, reject) => {
      this.batch.push({ req, resolve, reject });
      if (this.batch.length === 1) setImmediate(() => this.flush());
    });
  }

  private flush(): void {
    const batch = this.batch;
    this.batch = [];
    if (batch.length === 0) return;
    const now = this.deps.clock.now();
    const db = this.store.db;
    this.stats.receipt_commits++;
    this.stats.receipt_requests += batch.length;
    const out: Array<{ staged?: Staged; error?: unknown }> = [];
    const inner = db.transaction((req: DispatchRequest) => this.stage(req, now));
    try {
      withFullSync(db, db.transaction(() => {
        for (const b of batch) {
          try {
            out.push({ staged: inner(b.req) });
          } catch (e) {
            out.push({ error: e });
          }
        }
      }));
    } catch (e) {
      for (const b of batch) b.reject(e); // the commit failed: nothing was acknowledged
      return;
    }
    batch.forEach((b, i) => {
      const r = out[i];
      if (r.staged) {
        this.applyStaged(r.staged, now);
        b.resolve(r.staged.receipts);
      } else b.reject(r.error);
    });
    this.replan();
  }

  /** Decides and writes one request's receipts inside the caller's transaction; memory follows in applyStaged(). */
  private stage(req: DispatchRequest, now: number): Staged {
    const staged: Staged = { receipts: [], touched: [], stopRunning: [] };
    req.event_slots.forEach((input, i) => {
      const spec = toSpec(input, req.mode);
      const hash = contentHash(spec);
      // The database, not memory: an earlier request of the same batch may have changed it.
      const old = this.store.get(spec.event_id);
      if (old && old.content_hash === hash) {
        staged.receipts.push({ event_id: input.event_id, status: old.receipt });
        return;
      }
      // A cancelled event stays cancelled: a late retry of the original request must not revive it.
      if (old && old.state === "cancelled") {
        staged.receipts.push({ event_id: input.event_id, status: "cancelled" });
        return;
      }
      if (spec.end_ms <= now && !(old && spec.cancelled)) {
        throw new SitegateError("INVALID_REQUEST", "the request body is invalid; nothing was stored", {
          details: [{ path: `event_slots[${i}].end_time`, message: "must be in the future" }],
        });
      }
      if (!old) {
        const row = newRow(spec, hash, now);
        this.store.put(row);
        this.deps.onState?.(row.spec, row.state, now);
        staged.touched.push(row);
        staged.receipts.push({ event_id: input.event_id, status: row.receipt });
        return;
      }
      if (spec.cancelled) {
        if (old.state === "scheduled") {
          const row: EventRow = { ...old, spec, content_hash: hash, state: "cancelled", receipt: "cancelled", updated_at: now };
          this.store.put(row);
          this.deps.onState?.(row.spec, row.state, now);
          staged.touched.push(row);
        } else if (old.state === "running") {
          const row: EventRow = { ...old, content_hash: hash, receipt: "cancelled", spec: { ...old.spec, cancelled: true }, updated_at: now };
          this.store.put(row);
          staged.stopRunning.push(row);
        } else {
          throw new SitegateError("CONFLICT", `event ${spec.event_id} already ended (${old.state}); it cannot be cancelled`, {
            details: [{ path: `event_slots[${i}].cancelled`, message: `event already ${old.state}` }],
          });
        }
        staged.receipts.push({ event_id: input.event_id, status: "cancelled" });
        return;
      }
      if (old.state !== "scheduled" || old.spec.start_ms <= now) {
        throw new SitegateError("CONFLICT", `event ${spec.event_id} has started; it can no longer be changed, only cancelled`, {
          details: [{ path: `event_slots[${i}]`, message: `event ${old.state === "scheduled" ? "is starting" : `is ${old.state}`}; changes after start are refused` }],
        });
      }
      const row = newRow(spec, hash, now, old.created_at);
      this.store.put(row);
      this.deps.onState?.(row.spec, row.state, now);
      staged.touched.push(row);
      staged.receipts.push({ event_id: input.event_id, status: "accepted" });
    });
    return staged;
  }

  private applyStaged(staged: Staged, now: number): void {
    for (const row of staged.touched) {
      if (row.state === "scheduled") this.open.put(row);
      else this.open.remove(row.spec.event_id);
    }
    for (const row of staged.stopRunning) {
      const live = this.open.get(row.spec.event_id);
      if (live) {
        live.spec = row.spec;
        live.content_hash = row.content_hash;
        live.receipt = "cancelled";
        this.finish(live, now, true);
      }
    }
  }

  /** A local schedule's occurrence (config `schedules`): priority 100, no partner response. */
  submitLocal(spec: EventSpec): boolean {
    if (this.store.get(spec.event_id)) return false;
    const now = this.deps.clock.now();
    if (spec.end_ms <= now) return false;
    const row = newRow(spec, contentHash(spec), now);
    this.store.put(row);
    this.open.put(row);
    this.replan();
    return true;
  }

  // ---- timeline ----

  /** Moves every open event to the state its window says, then sets the next timer. */
  private replan(): void {
    if (this.stopped) return;
    if (this.timer !== null) this.deps.clock.clearTimer(this.timer);
    this.timer = null;
    const now = this.deps.clock.now();
    for (const row of this.open.due(now)) {
      if (row.spec.end_ms <= now) this.miss(row, now);
      else this.begin(row, now);
    }
    for (const row of [...this.open.running.values()]) if (row.spec.end_ms <= now) this.finish(row, now, false);
    this.reconcile(now);
    let next = this.open.nextStart();
    for (const row of this.open.running.values()) next = Math.min(next, row.spec.end_ms);
    for (const [id, a] of this.applied) {
      const r = this.deps.control.refreshMs(id);
      if (a.failed) next = Math.min(next, a.at + RETRY_FAILED_WRITE_MS);
      else if (r > 0) next = Math.min(next, a.at + r);
    }
    if (next === Infinity) return;
    this.timer = this.deps.clock.setTimer(() => {
      this.timer = null;
      this.replan();
    }, Math.min(MAX_TIMER_MS, Math.max(0, next - this.deps.clock.now())));
  }

  private begin(row: EventRow, now: number): void {
    row.state = "running";
    row.started_at = now;
    row.updated_at = now;
    this.open.put(row);
    const meter = this.gridMeter();
    if (row.spec.event_type === "shed" && meter) {
      row.progress.meter_id = meter.device_id;
      row.progress.baseline_w = this.meters.get(meter.device_id)?.mean(row.spec.start_ms) ?? meter.metrics.power_w;
    }
    this.store.db.transaction(() => {
      this.store.put(row); // committed before the first write
      this.deps.onState?.(row.spec, row.state, now);
    })();
    this.stats.started++;
    this.deps.log.info({ event_id: row.spec.event_id, type: row.spec.event_type, quantity_w: row.spec.quantity_w, mode: row.spec.mode, late_ms: now - row.spec.start_ms }, "event started");
    if (row.spec.event_type === "shed") this.stepShed(row, now, this.deps.control.devices());
  }

  private miss(row: EventRow, now: number): void {
    const s = row.spec;
    const body: ExecutionResponse = {
      event_id: s.event_id,
      status: "failed",
      timestamp: new Date(now).toISOString(),
      details: { mode: s.mode, requested_quantity: s.quantity, delivered_quantity: 0, unit: s.unit, cancelled: false, measured: false, reason: "missed", devices: [] },
    };
    this.close(row, "missed", body, now);
    this.stats.missed++;
    this.deps.log.warn({ event_id: s.event_id, start_time: new Date(s.start_ms).toISOString(), end_time: new Date(s.end_ms).toISOString() }, "event missed: it ended while the gateway was down");
  }

  private finish(row: EventRow, now: number, cancelled: boolean): void {
    const body = this.result(row, Math.min(now, row.spec.end_ms), cancelled, now);
    this.close(row, cancelled ? "cancelled" : "done", body, now);
    this.stats.finished++;
    this.deps.log.info({ event_id: row.spec.event_id, status: body.status, delivered: body.details.delivered_quantity, unit: row.spec.unit, cancelled }, "event ended");
  }

  private close(row: EventRow, state: EventRow["state"], body: ExecutionResponse, now: number): void {
    row.state = state;
    row.ended_at = now;
    row.updated_at = now;
    row.result = body as unknown as Record<string, unknown>;
    const tx = this.store.db.transaction(() => {
      this.store.put(row);
      this.deps.onState?.(row.spec, state, now);
      if (row.spec.source === "partner") this.deps.respond(row.spec, body);
    });
    withFullSync(this.store.db, tx);
    this.open.remove(row.spec.event_id);
  }

  // ---- execution ----

  /** Which event drives which device, what each is told, and the writes that follow. */
  private reconcile(now: number, all: DispatchDevice[] = this.deps.control.devices()): void {
    const running = [...this.open.running.values()];
    const usable = all.filter((d) => d.fully_configured);
    const assignment = assignDevices(running.map((r) => r.spec), usable);
    this.assigned = new Map([...assignment].map(([id, e]) => [id, e.event_id]));
    const desired = new Map<string, { row: EventRow; action: ActionName; pct?: number; watts?: number }>();
    for (const row of running) {
      const s = row.spec;
      const p = row.progress;
      const won = usable.filter((d) => assignment.get(d.device_id)?.event_id === s.event_id);
      for (const d of all) {
        if (!canDrive(s.event_type, d) || won.includes(d)) continue;
        const other = assignment.get(d.device_id);
        const dp = deviceProgress(p, d.device_id);
        dp.skipped = !d.fully_configured ? "not fully configured (REGISTRY_WRITE_FAILED)" : other ? `driven by event ${other.event_id} (higher priority)` : "not available";
      }
      if (s.event_type === "charge" || s.event_type === "discharge") {
        for (const sh of allocateProportional(s.event_type, s.quantity_w, won)) {
          const dp = deviceProgress(p, sh.device_id);
          dp.skipped = sh.skipped;
          if (sh.skipped) continue;
          dp.requested_w = sh.watts;
          const d = won.find((x) => x.device_id === sh.device_id)!;
          desired.set(sh.device_id, { row, action: s.event_type, pct: pctOf(sh.watts, d.max_power_w!), watts: Math.round(sh.watts) });
        }
      } else if (s.event_type === "shed") {
        for (const id of p.shed_steps) {
          const d = won.find((x) => x.device_id === id);
          const dp = deviceProgress(p, id);
          if (!d) continue;
          dp.skipped = undefined;
          if (SWITCH_TYPES.has(d.device_type)) desired.set(id, { row, action: "shed" });
          else desired.set(id, { row, action: "curtail", pct: dp.pct ?? 0 });
        }
      } else {
        for (const d of won) {
          const dp = deviceProgress(p, d.device_id);
          dp.skipped = d.online ? undefined : "offline";
          if (d.online) desired.set(d.device_id, { row, action: "restore" });
        }
      }
    }
    // Test mode plans exactly like live but writes nothing.
    for (const [id, c] of desired) if (c.row.spec.mode === "test") desired.delete(id);
    for (const id of [...this.applied.keys()]) {
      if (desired.has(id)) continue;
      this.applied.delete(id);
      this.deps.control.setRemote(id, false);
      if (this.deps.control.hasAction(id, "release")) this.write(id, "release", {}, null);
    }
    for (const [id, c] of desired) {
      const key = `${c.row.spec.event_id}:${c.action}:${c.pct ?? ""}`;
      const prev = this.applied.get(id);
      const refresh = this.deps.control.refreshMs(id);
      const due = !prev || prev.key !== key || (prev.failed ? now - prev.at >= RETRY_FAILED_WRITE_MS : refresh > 0 && now - prev.at >= refresh);
      if (!due) continue;
      this.applied.set(id, { event_id: c.row.spec.event_id, key, at: now, failed: false });
      this.deps.control.setRemote(id, true);
      if (c.row.progress.first_write_at === undefined) {
        c.row.progress.first_write_at = now;
        this.store.saveProgress(c.row, now);
      }
      this.write(id, c.action, { pct: c.pct, watts: c.watts }, c.row);
    }
  }

  /** Queues a device's writes behind its earlier ones; the outcome lands in the event's progress. */
  private write(deviceId: string, action: ActionName, params: { pct?: number; watts?: number }, row: EventRow | null): void {
    const prev = this.chains.get(deviceId) ?? Promise.resolve();
    const next = prev.then(async () => {
      try {
        await this.deps.control.apply(deviceId, action, params);
        this.stats.writes_ok++;
        if (row) {
          const dp = deviceProgress(row.progress, deviceId);
          dp.writes_ok++;
          dp.error = undefined;
        }
      } catch (e) {
        this.stats.writes_failed++;
        const msg = errorMessage(e);
        this.deps.log.warn({ device_id: deviceId, action, err: msg }, "dispatch write failed");
        if (row) {
          const dp = deviceProgress(row.progress, deviceId);
          dp.writes_failed++;
          dp.error = `${action}: ${msg}`;
          const a = this.applied.get(deviceId);
          if (a && a.event_id === row.spec.event_id) a.failed = true;
        }
      }
    });
    this.chains.set(deviceId, next);
    void next.finally(() => {
      if (this.chains.get(deviceId) === next) this.chains.delete(deviceId);
    });
  }

  /** The grid meter: a fully configured meter, one named "grid" first, else the first by id. */
  private gridMeter(): DispatchDevice | undefined {
    const meters = this.deps.control.devices().filter((d) => d.device_type === METER_TYPE && d.fully_configured && d.metrics.power_w !== undefined);
    meters.sort((a, b) => gridMeterOrder(a.device_id, b.device_id));
    return meters[0];
  }

  /**
   * shed, one device at a time: switchable loads first (by device_id), then PV curtailed
   * by what is still missing; with a grid meter each step waits for a reading taken after
   * it, and stops once the measured drop meets the quantity.
   */
  private stepShed(row: EventRow, now: number, devs: DispatchDevice[]): void {
    const p = row.progress;
    // Computed here, not taken from the last reconcile: a shed that just began has none yet.
    const assignment = assignDevices([...this.open.running.values()].map((r) => r.spec), devs.filter((d) => d.fully_configured));
    const won = devs.filter((d) => assignment.get(d.device_id)?.event_id === row.spec.event_id);
    const order = [...won.filter((d) => SWITCH_TYPES.has(d.device_type)), ...won.filter((d) => !SWITCH_TYPES.has(d.device_type))];
    const meter = p.meter_id ? devs.find((d) => d.device_id === p.meter_id) : undefined;
    for (;;) {
      const next = order.find((d) => !p.shed_steps.includes(d.device_id) && d.online);
      if (!next) return;
      const last = p.shed_steps[p.shed_steps.length - 1];
      const lastAt = last ? p.devices[last]?.stepped_at ?? 0 : 0;
      if (meter && last && (this.seenAt.get(meter.device_id) ?? 0) <= lastAt) return; // wait for the meter to see the last step
      const drop = this.currentDrop(row, devs);
      if (drop >= row.spec.quantity_w) return;
      if (meter && last) {
        const dl = p.devices[last];
        if (dl && dl.drop_w === undefined) dl.drop_w = Math.max(0, drop - (p.drop_before_step ?? 0));
      }
      const dp = deviceProgress(p, next.device_id);
      dp.stepped_at = now;
      p.drop_before_step = drop;
      if (SWITCH_TYPES.has(next.device_type)) {
        dp.requested_w = Math.max(0, row.spec.quantity_w - drop);
      } else {
        const pv = Math.max(0, next.metrics.power_w ?? 0);
        const missing = Math.max(0, row.spec.quantity_w - drop);
        const limit = Math.max(0, pv - missing);
        dp.before_w = pv;
        dp.requested_w = Math.min(pv, missing);
        dp.pct = Math.floor((limit / (next.max_power_w || pv || 1)) * 100);
      }
      p.shed_steps.push(next.device_id);
      this.store.saveProgress(row, now);
      // With a meter, live steps wait for it to measure this one; test mode plans them all.
      if (meter && row.spec.mode !== "test") return;
    }
  }

  /** shed's drop so far: grid meter against its baseline, or else curtailed PV's own drop. */
  private currentDrop(row: EventRow, devs: DispatchDevice[]): number {
    const p = row.progress;
    const meter = p.meter_id ? devs.find((d) => d.device_id === p.meter_id) : undefined;
    if (meter && p.baseline_w !== undefined && meter.metrics.power_w !== undefined) return p.baseline_w - meter.metrics.power_w;
    let drop = 0;
    for (const id of p.shed_steps) {
      const dp = p.devices[id];
      const d = devs.find((x) => x.device_id === id);
      if (dp?.before_w !== undefined && d?.metrics.power_w !== undefined) drop += Math.max(0, dp.before_w - d.metrics.power_w);
    }
    return drop;
  }

  // ---- telemetry ----

  /** A poll snapshot: measurement, the meters' baseline window, and shed's next steps. */
  observe(snap: Snapshot): void {
    if (this.stopped) return;
    const ts = snap.ts;
    const devs = this.deps.control.devices();
    const byId = new Map(snap.devices.map((d) => [d.device_id, d.metrics]));
    for (const d of devs) {
      const m = byId.get(d.device_id);
      if (!m) continue;
      this.seenAt.set(d.device_id, ts);
      if (m.power_w === undefined || d.device_type !== METER_TYPE) continue;
      let w = this.meters.get(d.device_id);
      if (!w) this.meters.set(d.device_id, (w = new RollingWindow(60_000)));
      w.add(ts, m.power_w);
    }
    let running = false;
    for (const row of this.open.running.values()) {
      if (row.spec.mode === "test") continue;
      running = true;
      const p = row.progress;
      if (p.first_write_at === undefined || ts <= p.first_write_at) continue;
      const s = row.spec;
      if (s.event_type === "charge" || s.event_type === "discharge") {
        for (const [id, dp] of Object.entries(p.devices)) {
          const m = byId.get(id);
          if (m?.power_w === undefined || (dp.requested_w <= 0 && !dp.mean)) continue;
          // A device another event has taken over delivers nothing for this one.
          const mine = this.assigned.get(id) === s.event_id;
          dp.mean = addSample(dp.mean, ts, mine ? (s.event_type === "discharge" ? m.power_w : -m.power_w) : 0, this.hold);
        }
      } else if (s.event_type === "shed") {
        const g = p.meter_id ? byId.get(p.meter_id)?.power_w : undefined;
        if (g !== undefined) p.grid = addSample(p.grid, ts, g, this.hold);
        for (const id of p.shed_steps) {
          const m = byId.get(id);
          if (m?.power_w !== undefined) p.devices[id].mean = addSample(p.devices[id].mean, ts, m.power_w, this.hold);
        }
      }
      if (p.window_from === undefined) p.window_from = ts;
    }
    const now = this.deps.clock.now();
    for (const row of this.open.running.values()) if (row.spec.event_type === "shed") this.stepShed(row, now, devs);
    if (running && now - this.lastSave >= PROGRESS_SAVE_MS) {
      this.lastSave = now;
      for (const row of this.open.running.values()) this.store.saveProgress(row, now);
    }
    this.reconcile(now, devs);
  }

  // ---- results ----

  private result(row: EventRow, until: number, cancelled: boolean, now: number): ExecutionResponse {
    const s = row.spec;
    const p = row.progress;
    const test = s.mode === "test";
    const hold = this.hold;
    const devices: Array<Record<string, unknown>> = [];
    let delivered = 0;
    let anyFailed = false;
    const mean = (m: DeviceProgress["mean"]) => meanUntil(m, until, hold, p.window_from) ?? 0;
    for (const [id, dp] of Object.entries(p.devices).sort(([a], [b]) => byCodeUnit(a, b))) {
      let dw = 0;
      if (test) dw = dp.skipped ? 0 : dp.requested_w;
      else if (s.event_type === "charge" || s.event_type === "discharge") dw = mean(dp.mean);
      else if (s.event_type === "shed") dw = dp.before_w !== undefined ? Math.max(0, dp.before_w - mean(dp.mean)) : dp.drop_w ?? 0;
      else if (s.event_type === "restore") dw = dp.writes_ok > 0 && !dp.error ? s.quantity_w : 0;
      const touched = dp.writes_ok + dp.writes_failed > 0 || (test && !dp.skipped);
      let status: string;
      if (!touched && dp.skipped) status = "skipped";
      else if (dp.error && dp.writes_ok === 0) status = "failed";
      else if (s.event_type === "shed" || s.event_type === "restore") status = dp.error ? "failed" : "completed";
      else status = statusFor(dw, dp.requested_w);
      if (status === "failed") anyFailed = true;
      const entry: Record<string, unknown> = { device_id: id, status, requested_w: Math.round(dp.requested_w), delivered_w: Math.round(dw) };
      const err = dp.error ?? dp.skipped ?? (status === "failed" && !test ? "measured no power in the event's direction" : undefined);
      if (err) entry.error = err;
      devices.push(entry);
      if (s.event_type === "charge" || s.event_type === "discharge" || test) delivered += Math.max(0, dw);
    }
    // A test shed plans every step at once, each for what was still missing: cap the sum.
    if (test && s.event_type === "shed") delivered = Math.min(delivered, s.quantity_w);
    if (!test && s.event_type === "shed") {
      if (p.meter_id && p.baseline_w !== undefined && p.grid) delivered = Math.max(0, p.baseline_w - (meanUntil(p.grid, until, hold, p.window_from) ?? p.baseline_w));
      else delivered = devices.reduce((a, d) => a + (d.delivered_w as number), 0);
    }
    if (s.event_type === "restore") {
      const targets = devices.filter((d) => d.status !== "skipped");
      const ok = targets.filter((d) => d.status === "completed").length;
      delivered = targets.length ? (s.quantity_w * ok) / targets.length : 0;
    }
    let status = statusFor(delivered, s.quantity_w);
    if (status === "completed" && anyFailed) status = "partial";
    if (s.quantity_w === 0 && devices.every((d) => d.status === "skipped") && s.event_type !== "restore") status = devices.length ? "failed" : "completed";
    return {
      event_id: s.event_id,
      status,
      timestamp: new Date(now).toISOString(),
      details: {
        mode: s.mode,
        requested_quantity: s.quantity,
        delivered_quantity: fromWatts(delivered, s.unit),
        unit: s.unit,
        cancelled,
        measured: !test,
        devices,
      },
    };
  }

  // ---- views ----

  list(limit?: number): EventRow[] {
    return this.store.list(limit);
  }

  running(): number {
    return this.open.running.size;
  }

  scheduled(): number {
    return this.open.scheduledCount;
  }
}

function newRow(spec: EventSpec, hash: string, now: number, createdAt = now): EventRow {
  const cancelled = spec.cancelled;
  return {
    spec,
    content_hash: hash,
    state: cancelled ? "cancelled" : "scheduled",
    receipt: cancelled ? "cancelled" : "accepted",
    started_at: null,
    ended_at: null,
    progress: emptyProgress(),
    result: null,
    created_at: createdAt,
    updated_at: now,
  };
}

function deviceProgress(p: EventRow["progress"], id: string): DeviceProgress {
  return (p.devices[id] ??= { requested_w: 0, writes_ok: 0, writes_failed: 0 });
}

/**
 * Receipts and results are rare and must survive a power cut: commit them with
 * synchronous=FULL (telemetry stays at NORMAL to spare the SD card).
 */
function withFullSync(db: Db, tx: () => void): void {
  db.pragma("synchronous = FULL");
  try {
    tx();
  } finally {
    db.pragma("synchronous = NORMAL");
  }
}
