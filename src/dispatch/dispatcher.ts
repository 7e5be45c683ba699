// The dispatcher: receipts, the durable timeline and the execution of events on the
// devices. Driven by timers at the boundaries of events (never a polling loop) and by
// telemetry snapshots, which carry the measurements. Every state change is committed to
// SQLite before it is answered or acted on; the execution response goes into the delivery log
// in the same transaction that ends the event, so it exists exactly once.
import type { Logger } from "../log.js";
import { SitegateError } from "../errors.js";
import { STOP_BUDGET_MS, type MetricFamily, type Part, type PartHealth } from "../lifecycle.js";
import type { Db } from "../storage/db.js";
import type { Snapshot } from "../telemetry/types.js";
import type { Clock } from "../util/clock.js";
import type { DeviceDirectory } from "../model/device.js";
import { withFullSync } from "../storage/durable.js";
import { Executor, type ExecutionResponse } from "./executor.js";
import { missedResponse } from "./result.js";
import { contentHash, type DispatchRequest, type EventSpec } from "./request.js";
import { EventStore, OpenBound, OpenWindow, type EventRow } from "./store.js";
import { observeRunning, putBackAll, readBack, resumeAll } from "./gap-readback.js";
import { batchTransaction, newRow, stageRequest, type BatchOutcome, type BatchTx, type Receipt, type Staged } from "./receipts.js";
import { dispatchMetrics } from "./dispatch-metrics.js";
import { Timeline } from "./timeline.js";
import { ReleaseRequests, answerReleaseRequests, unreleasedWarnings } from "./release-requests.js";

export type { ExecutionResponse } from "./executor.js";

export type { Receipt } from "./receipts.js";

export interface DispatcherDeps {
  db: () => Db;
  /** Every device of the site (devices/): dispatch reads them and drives their capabilities. */
  devices: Pick<DeviceDirectory, "list" | "get">;
  clock: Clock;
  log: Logger;
  pollIntervalMs: number;
  /** Appends the execution response to the delivery log; called inside the transaction that ends the event. */
  respond: (event: EventSpec, body: ExecutionResponse) => void;
  /** Told of every state an event enters, inside the transaction that commits it (the fleet uplink's `events`). */
  onState?: (event: EventSpec, state: EventRow["state"], at: number) => void;
}

const STEP_CHECK_MS = 5000;
const CLOCK_STEP_MS = 2000;
const MAX_TIMER_MS = 60_000;
const HISTORY_DAYS = 30;
/** How long start waits for the devices a crashed run left driven to be put back before the API starts anyway. */
const PUT_BACK_WAIT_MS = 10_000;
/** How long a cancellation's receipt waits for the writes in flight to its devices and their release (B4). */
const CANCEL_SETTLE_MS = 2000;
/** Of the stop budget, what is kept back so that the devices left are reported (and their remote control ended) before the lifecycle gives up. */
const STOP_REPORT_MS = 250;

export class Dispatcher implements Part {
  readonly name = "dispatch";
  private store!: EventStore;
  private requests!: ReleaseRequests;
  private window!: OpenWindow;
  private bound!: OpenBound;
  private readonly open = new Timeline();
  private readonly exec: Executor;
  private batch: Array<{ req: DispatchRequest; resolve: (r: Receipt[]) => void; reject: (e: unknown) => void }> = [];
  private timer: unknown = null;
  private watch: unknown = null;
  private offset = 0;
  private stopped = true;
  private readonly counts = { started: 0, finished: 0, missed: 0, clock_steps: 0, receipt_commits: 0, receipt_requests: 0 };

  constructor(private readonly deps: DispatcherDeps) {
    this.exec = new Executor({
      devices: deps.devices,
      clock: deps.clock,
      log: deps.log,
      pollIntervalMs: deps.pollIntervalMs,
      save: (row) => this.store.saveProgress(row, this.deps.clock.now()),
      end: (row, reason) => {
        const live = this.open.get(row.spec.event_id);
        if (!live || live.state !== "running") return;
        live.progress.ended_by = reason;
        this.finish(live, this.deps.clock.now(), false);
      },
    });
  }

  get stats() {
    return { ...this.counts, ...this.exec.stats };
  }

  /** Loads the timeline, after a crash reads each device once for the restart gap (gap-readback.ts), and plans; devices a crashed
   * run left driven are put back before this returns (the API starts after it): no answer while an event that is over drives one. */
  async start(): Promise<void> {
    this.store = new EventStore(this.deps.db());
    this.batchTx = null;
    this.exec.start(this.store.db);
    this.requests = new ReleaseRequests(this.store.db);
    const now = this.deps.clock.now();
    this.store.sweep(now - HISTORY_DAYS * 86_400_000);
    this.window = new OpenWindow(this.store);
    this.bound = new OpenBound(this.store);
    this.window.fill(now, this.open);
    const running = [...this.open.running.values()];
    if (resumeAll(running, now, this.store) && !(await readBack(this.exec, this.deps, this.store, running))) return; // stopped meanwhile
    this.stopped = false;
    this.offset = this.deps.clock.now() - this.deps.clock.mono();
    const watch = () => {
      if (this.stopped) return;
      const off = this.deps.clock.now() - this.deps.clock.mono();
      if (Math.abs(off - this.offset) > CLOCK_STEP_MS) {
        this.counts.clock_steps++;
        this.deps.log.warn({ step_ms: Math.round(off - this.offset) }, "wall clock stepped; planning the timeline again");
        this.offset = off;
        this.replan();
      }
      this.watch = this.deps.clock.setTimer(watch, STEP_CHECK_MS);
    };
    this.watch = this.deps.clock.setTimer(watch, STEP_CHECK_MS);
    if (this.open.size) this.deps.log.info({ open_events: this.open.size }, "dispatch timeline loaded");
    const later = this.store.countOpen() - this.open.size; // once per start
    if (later > 0)
      this.deps.log.warn({ not_loaded: later }, "open events beyond the scheduler's window stay in the database until it reaches them");
    this.replan();
    const put = await this.exec.jobs.putBack(PUT_BACK_WAIT_MS);
    if (put === 0) return;
    const left = this.exec.ledger
      .all()
      .filter((r) => !r.holders.some((h) => this.open.running.has(h)))
      .map((r) => r.device_id);
    if (left.length)
      this.deps.log.warn({ devices: left }, "devices left driven by the previous run not put back yet; retried while the API starts");
    else this.deps.log.info({ devices: put }, "devices left driven by the previous run put back");
  }

  async stop(budgetMs = STOP_BUDGET_MS): Promise<void> {
    this.stopped = true;
    if (this.timer !== null) this.deps.clock.clearTimer(this.timer);
    if (this.watch !== null) this.deps.clock.clearTimer(this.watch);
    this.timer = this.watch = null;
    const now = this.deps.clock.now();
    // No device stays shed or limited without a running event: put every one back (so the restart gap
    // delivers nothing but where one is offline). Running events stay running and take their devices again.
    putBackAll(this.open.running.values(), { devices: this.deps.devices, ledger: this.exec.ledger }, now, this.exec.hold, this.store);
    await this.exec.jobs.stop(Math.max(0, budgetMs - STOP_REPORT_MS));
  }

  // ---- receipts ----

  /** Validated request -> receipts, committed (synchronous=FULL) before they are returned. Throws INVALID_REQUEST
   * (end_time past for a new or changed event) or CONFLICT (a change after start); then nothing is stored. */
  submit(req: DispatchRequest): Receipt[] {
    return this.submitHeld(req).receipts;
  }

  /** submit(), answered once final: a running event it cancels waits for its devices' writes in flight and release (at most 2 s). */
  submitFinal(req: DispatchRequest): Receipt[] | Promise<Receipt[]> {
    const { receipts, held } = this.submitHeld(req);
    return held.length ? this.exec.jobs.settle(held, CANCEL_SETTLE_MS).then(() => receipts) : receipts;
  }

  private submitHeld(req: DispatchRequest): { receipts: Receipt[]; held: string[] } {
    const now = this.deps.clock.now();
    const staged = withFullSync(
      this.store.db,
      this.store.db.transaction(() => this.stage(req, now)),
    );
    const held = this.applyStaged(staged, now);
    this.replan();
    return { receipts: staged.receipts, held };
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

  /** The group commit's transaction, made once per database (receipts.ts). */
  private batchTx: BatchTx | null = null;

  private flush(): void {
    const batch = this.batch;
    this.batch = [];
    if (batch.length === 0) return;
    const now = this.deps.clock.now();
    const db = this.store.db;
    this.counts.receipt_commits++;
    this.counts.receipt_requests += batch.length;
    const out: BatchOutcome[] = [];
    this.batchTx ??= batchTransaction(db, (req, at) => this.stage(req, at));
    const tx = this.batchTx;
    try {
      withFullSync(db, () => tx(batch, now, out));
    } catch (e) {
      for (const b of batch) b.reject(e); // the commit failed: nothing was acknowledged
      return;
    }
    const answers: Array<() => void> = [];
    const cancelled: string[] = [];
    batch.forEach((b, i) => {
      const r = out[i];
      // The transaction answers every request of the batch, so a missing answer is a bug.
      if (r === undefined) b.reject(new SitegateError("INTERNAL", "the receipts' commit answered no outcome for a request"));
      else if (r.staged) {
        const staged = r.staged;
        cancelled.push(...this.applyStaged(staged, now));
        answers.push(() => b.resolve(staged.receipts));
      } else b.reject(r.error);
    });
    this.replan(); // a cancellation is final once its receipt is sent: it waits for the writes in flight and the releases behind them
    void this.exec.jobs.settle(cancelled, CANCEL_SETTLE_MS).then(() => answers.forEach((answer) => answer()));
  }

  /** Decides and writes one request's receipts inside the caller's transaction; memory follows in applyStaged(). */
  private stage(req: DispatchRequest, now: number): Staged {
    return stageRequest(req, now, { store: this.store, bound: this.bound, onState: this.deps.onState });
  }

  /** Memory follows the committed receipts; the devices of the running events it cancelled. */
  private applyStaged(staged: Staged, now: number): string[] {
    const held: string[] = [];
    for (const row of staged.touched) {
      if (row.state === "scheduled" && this.window.holds(row.spec)) this.open.put(row);
      else this.open.remove(row.spec.event_id);
    }
    for (const row of staged.stopRunning) {
      const live = this.open.get(row.spec.event_id);
      if (live) {
        held.push(...this.exec.devicesOf(live.spec.event_id));
        live.spec = row.spec;
        live.content_hash = row.content_hash;
        live.receipt = "cancelled";
        this.finish(live, now, true);
      }
    }
    return held;
  }

  /** A local schedule's occurrence (config `schedules`): priority 100, no partner response. */
  submitLocal(spec: EventSpec): boolean {
    if (this.store.get(spec.event_id)) return false;
    const now = this.deps.clock.now();
    if (spec.end_ms <= now) return false;
    const row = newRow(spec, contentHash(spec), now);
    this.store.put(row);
    this.bound.add(1); // a local event counts, but is never refused
    if (this.window.holds(row.spec)) this.open.put(row);
    this.replan();
    return true;
  }

  /** Whether an event of this source is scheduled or running. */
  hasOpen(source: string): boolean {
    return this.open.all().some((r) => r.spec.source === source);
  }

  /** Ends every open event of a local source now (a GPIO input released): a running one is cancelled and its devices put back. */
  endLocal(source: string, reason: string): number {
    if (this.stopped) return 0;
    const now = this.deps.clock.now();
    let n = 0;
    for (const row of this.open.all().filter((r) => r.spec.source === source)) {
      n++;
      row.spec = { ...row.spec, cancelled: true };
      row.receipt = "cancelled";
      row.progress.ended_by = reason;
      if (row.state === "running") this.finish(row, now, true);
      else {
        row.state = "cancelled";
        row.updated_at = now;
        this.store.put(row);
        this.open.remove(row.spec.event_id);
      }
    }
    if (n) this.replan();
    return n;
  }

  // ---- timeline ----

  /** Moves every open event to the state its window says, then sets the next timer. */
  private replan(): void {
    if (this.stopped) return;
    if (this.timer !== null) this.deps.clock.clearTimer(this.timer);
    this.timer = null;
    const now = this.deps.clock.now();
    this.window.fill(now, this.open);
    for (const row of this.open.due(now)) {
      if (row.spec.end_ms <= now) this.miss(row, now);
      else this.begin(row, now);
    }
    for (const row of [...this.open.running.values()]) if (row.spec.end_ms <= now) this.finish(row, now, false);
    this.exec.reconcile([...this.open.running.values()], now); // every event past its end has ended: its devices go back (B4)
    let next = Math.min(this.open.nextStart(), this.exec.nextDue());
    for (const row of this.open.running.values()) next = Math.min(next, row.spec.end_ms);
    if (next === Infinity) return;
    this.timer = this.deps.clock.setTimer(
      () => {
        this.timer = null;
        this.replan();
      },
      Math.min(MAX_TIMER_MS, Math.max(0, next - this.deps.clock.now())),
    );
  }

  private begin(row: EventRow, now: number): void {
    row.state = "running";
    row.started_at = now;
    row.updated_at = now;
    row.progress.window_from = Math.max(row.spec.start_ms, row.created_at);
    this.open.put(row);
    this.store.db.transaction(() => {
      this.store.put(row); // committed before the first write
      this.deps.onState?.(row.spec, row.state, now);
    })();
    this.counts.started++;
    this.deps.log.info(
      {
        event_id: row.spec.event_id,
        type: row.spec.event_type,
        quantity_w: row.spec.quantity_w,
        mode: row.spec.mode,
        late_ms: now - row.spec.start_ms,
      },
      "event started",
    );
    this.exec.begin(row, [...this.open.running.values()], now);
  }

  private miss(row: EventRow, now: number): void {
    const s = row.spec;
    const body = missedResponse(s, now);
    this.close(row, "missed", body, now);
    this.counts.missed++;
    this.deps.log.warn(
      { event_id: s.event_id, start_time: new Date(s.start_ms).toISOString(), end_time: new Date(s.end_ms).toISOString() },
      "event missed: it ended while the gateway was down",
    );
  }

  private finish(row: EventRow, now: number, cancelled: boolean): void {
    const body = this.exec.result(row, Math.min(now, row.spec.end_ms), cancelled, now);
    this.close(row, cancelled ? "cancelled" : "done", body, now);
    this.counts.finished++;
    this.deps.log.info(
      { event_id: row.spec.event_id, status: body.status, delivered: body.details.delivered_quantity, unit: row.spec.unit, cancelled },
      "event ended",
    );
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

  // ---- telemetry ----

  /** A poll snapshot: measurement, baselines, the kinds' next steps, and the writes that follow. */
  observe(snap: Snapshot): void {
    if (this.stopped) return;
    if (observeRunning(this.exec, snap, this.open.running, this.deps.clock.now())) this.replan();
    answerReleaseRequests(this.requests, this.exec, this.deps.clock.now());
  }

  /** /healthz: one warning per device whose release did not read back. */
  health(): PartHealth {
    return { warnings: this.stopped || !this.exec.ledger ? [] : unreleasedWarnings(this.exec.ledger) };
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

  metrics(): MetricFamily[] {
    return dispatchMetrics(this.stats, { running: this.running(), scheduled: this.scheduled(), unreleased: this.exec.unreleased });
  }
}
