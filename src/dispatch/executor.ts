// Execution of running events on the devices, the same for every kind: each snapshot and timer plans
// the running events (plan.ts), writes what they claim per device through the device ledger (the device
// captures its pre-event state first, then the capability the claim maps to is driven: devices.ts),
// rewrites setpoints before the device's own revert timeout, and puts back every device that no running
// event drives any more. It records when any event drove any device (a shed baseline's quiet minute).
// After each write the device is read once (a confirmation), so the latest values and the measurement
// do not wait for the next poll. The kinds (kinds/) decide what to claim, measure and report; this file
// never branches on an event type.
import { errorMessage } from "../errors.js";
import type { Logger } from "../log.js";
import type { Db } from "../storage/db.js";
import type { Clock } from "../util/clock.js";
import type { ActionName } from "../model/vocabulary.js";
import type { DeviceDirectory, PreState } from "../model/device.js";
import type { Snapshot } from "../telemetry/types.js";
import { gridMeter } from "../devices/grid-meter.js";
import type { Planned } from "./allocate.js";
import { confirmRead, meterView, planned, refreshOf } from "./devices.js";
import { Ledger } from "./ledger.js";
import { DeviceJobs } from "./releases.js";
import { addSample } from "./measure.js";
import { BusyTimes, PowerHistory } from "./busy-times.js";
import { planAll, shareOf, type Desired } from "./plan.js";
import { executionResponse, type ExecutionResponse } from "./result.js";
import type { EventRow } from "./store.js";
import { kindOf } from "./kinds/index.js";
import type { KindContext } from "./kinds/kind.js";

export type { ExecutionResponse } from "./result.js";

export interface ExecutorDeps {
  devices: Pick<DeviceDirectory, "list" | "get">;
  clock: Clock;
  log: Logger;
  pollIntervalMs: number;
  /** Commits an event's progress. */
  save(row: EventRow): void;
  /** Ends a running event now (a restore ending a shed). */
  end(row: EventRow, reason: string): void;
}

const RETRY_MS = 5000;
const PROGRESS_SAVE_MS = 10_000;
const MAX_HOLDERS = 16;

export class Executor {
  ledger!: Ledger;
  private readonly applied = new Map<string, { key: string; action: ActionName; at: number; failed: boolean }>();
  /** Devices kept for a running event while offline (see nextDue). */
  private readonly heldOffline = new Set<string>();
  private readonly history = new PowerHistory();
  /** When any live event drove any device (a claim, or a ledger row not yet put back). */
  private readonly busy = new BusyTimes();
  /** Devices with a confirmation read in flight (at most one each). */
  private readonly confirming = new Set<string>();
  /** Live claims of the last plan: device -> events with their watts. */
  private claims = new Map<string, Array<{ event_id: string; watts: number }>>();
  /** Devices each event (live or test) claimed in the last plan. */
  private claimed = new Map<string, string[]>();
  private running: readonly EventRow[] = [];
  private devs: Planned[] = [];
  private lastSave = 0;
  readonly stats = { writes_ok: 0, writes_failed: 0, releases_ok: 0, releases_failed: 0, confirms_ok: 0, confirms_failed: 0 };

  /** Each device's lane of writes, releases and read-backs, and the release retries. */
  readonly jobs: DeviceJobs;

  constructor(private readonly deps: ExecutorDeps) {
    this.jobs = new DeviceJobs({
      clock: deps.clock,
      log: deps.log,
      ledger: () => this.ledger,
      stats: this.stats,
      setRemote: (id, remote) => this.deps.devices.get(id)?.setRemote(remote),
    });
  }

  /** How long a sample stands for its device: two poll intervals, at least 5 s (a bus may wait out another device's timeout). */
  get hold(): number {
    return Math.max(2 * this.deps.pollIntervalMs, 5000);
  }

  start(db: Db): void {
    this.jobs.stopping = false;
    this.ledger = new Ledger(db, this.deps.devices);
    if (this.ledger.size)
      this.deps.log.info(
        { devices: this.ledger.all().map((r) => r.device_id) },
        "device ledger holds devices from before the restart; releasing those no running event drives",
      );
  }

  private ctx(now: number): KindContext {
    const devs = this.devs;
    const byId = new Map(devs.map((d) => [d.device.id, d]));
    return {
      now,
      hold: this.hold,
      devices: devs,
      device: (id) => byId.get(id),
      gridMeter: () => gridMeter(devs, meterView),
      baseline: (id, until) => this.history.baseline(id, until),
      quietUntil: (before) => this.busy.quietUntil(before),
      seenAt: (id) => this.history.seenAt(id),
      fresh: (id, at) =>
        this.history.fresh(id, at, 2 * this.deps.pollIntervalMs + (this.deps.devices.get(id)?.info().answer_timeout_ms ?? 1000)),
      drivers: (id) => (this.claims.get(id) ?? []).map((c) => c.event_id),
      share: (id, eventId) => shareOf(this.claims.get(id) ?? [], eventId),
      ledger: (id) => this.ledger.get(id),
      ledgerRows: () => this.ledger.all(),
      running: () => this.running,
      claimedBy: (eventId) => this.claimed.get(eventId) ?? [],
      end: (row, reason) => this.deps.end(row, reason),
      verify: (id, pre, done) => this.verify(id, pre, done),
      save: (row) => this.deps.save(row),
    };
  }

  /** An event starts: its measured window, then its kind's own start (baselines; a restore ends sheds). */
  begin(row: EventRow, running: readonly EventRow[], now: number): void {
    row.progress.window_from = Math.max(row.spec.start_ms, row.created_at);
    this.running = running;
    this.devs = this.usable(planned(this.deps.devices));
    kindOf(row.spec.event_type).begin?.(row, this.ctx(now));
  }

  /** Plans every running event: the claims (who drives which device) and whether any is driven; nothing written. */
  plan(running: readonly EventRow[], now: number, all: Planned[] = planned(this.deps.devices)): Map<string, Desired> {
    this.running = running;
    this.devs = this.usable(all);
    const { desired, claimed } = planAll(running, this.ctx(now), this.devs, (row, e) =>
      this.deps.log.error({ event_id: row.spec.event_id, err: errorMessage(e) }, "cannot plan an event"),
    );
    // A device that cannot be released is written by nobody until it reads its release back.
    for (const r of this.ledger.unreleased()) desired.delete(r.device_id);
    this.claimed = claimed;
    this.claims = new Map([...desired].map(([id, w]) => [id, w.rows.map((r) => ({ event_id: r.row.spec.event_id, watts: r.watts }))]));
    // It blocks nothing but itself: not the quiet minute a shed's baseline needs either.
    this.busy.mark(desired.size > 0 || this.ledger.all().some((r) => r.unreleased === undefined), now);
    return desired;
  }

  /** Plans every running event, writes what changed or is due, releases what no event drives. */
  reconcile(running: readonly EventRow[], now: number, all: Planned[] = planned(this.deps.devices)): void {
    const desired = this.plan(running, now, all);

    for (const [id, want] of desired) {
      const holders = want.rows.map((r) => r.row.spec.event_id);
      const key = `${want.action}:${want.pct ?? ""}:${Math.round(want.watts ?? 0)}:${holders.join(",")}`;
      const prev = this.applied.get(id);
      const refresh = refreshOf(this.deps.devices.get(id), want.action);
      const due = !prev || prev.key !== key || (prev.failed ? now - prev.at >= RETRY_MS : refresh > 0 && now - prev.at >= refresh);
      if (!due) continue;
      this.applied.set(id, { key, action: want.action, at: now, failed: false });
      this.deps.devices.get(id)?.setRemote(true);
      for (const { row } of want.rows) {
        if (row.progress.first_write_at !== undefined) continue;
        row.progress.first_write_at = now;
        this.deps.save(row);
      }
      this.hold_(id, key, holders, want, now);
    }

    const live = new Set(running.filter((r) => r.spec.mode === "live" && r.state === "running").map((r) => r.spec.event_id));
    const byId = new Map(all.map((d) => [d.device.id, d]));
    this.heldOffline.clear();
    for (const id of new Set([...this.applied.keys(), ...this.ledger.all().map((r) => r.device_id)])) {
      if (desired.has(id) || this.jobs.releasing.has(id)) continue;
      const l = this.ledger.get(id);
      // A device whose event still runs but that is offline now (e.g. just after a restart) keeps its setpoint.
      if (l && l.unreleased === undefined && l.holders.some((h) => live.has(h)) && !byId.get(id)?.online) {
        this.heldOffline.add(id);
        continue;
      }
      if (!this.jobs.backoff.ready(id, now)) continue;
      this.applied.delete(id);
      if (l) void this.jobs.release(id); // logs and retries its own failure
      else this.deps.devices.get(id)?.setRemote(false);
    }
  }

  /** The devices the kinds plan with: one whose release did not read back is unavailable, with why (B4). */
  private usable(devs: Planned[]): Planned[] {
    if (!this.ledger || this.ledger.unreleased().length === 0) return devs;
    return devs.map((d) => {
      const why = this.ledger.get(d.device.id)?.unreleased;
      return why === undefined ? d : { ...d, online: false, blocked: `not released: ${why}` };
    });
  }

  /** Earliest time a setpoint must be rewritten or a failed write or release retried. */
  nextDue(): number {
    let next = Infinity;
    for (const [id, a] of this.applied) {
      // Kept offline for its event: the next poll looks again (its past refresh time would re-arm at once).
      if (this.heldOffline.has(id)) continue;
      const r = refreshOf(this.deps.devices.get(id), a.action);
      if (a.failed) next = Math.min(next, a.at + RETRY_MS);
      else if (r > 0) next = Math.min(next, a.at + r);
    }
    return Math.min(next, this.jobs.backoff.next(this.jobs.releasing));
  }

  private hold_(id: string, key: string, holders: string[], want: Desired, now: number): void {
    const rows = want.rows.map((r) => r.row);
    // A cancellation is final: a write whose events all ended before it left is never made.
    const wanted = () => rows.some((r) => r.state === "running");
    this.jobs.chain(id, async () => {
      if (!wanted()) return;
      try {
        const keep = (this.ledger.get(id)?.holders ?? []).filter((h) => this.running.some((r) => r.spec.event_id === h));
        await this.ledger.hold(
          id,
          [...new Set([...keep, ...holders])].slice(-MAX_HOLDERS),
          { action: want.action, pct: want.pct, watts: want.watts },
          now,
          wanted,
        );
        this.stats.writes_ok++;
        for (const row of rows) {
          const dp = row.progress.devices[id];
          if (!dp) continue;
          dp.writes_ok++;
          dp.acked_at ??= this.deps.clock.now();
          dp.error = undefined;
          // The first write the device showed is committed at once: a crash before the event's first reading still knows it (gap-readback.ts).
          if (dp.writes_ok === 1 && row.state === "running") this.deps.save(row);
        }
        // Not awaited: the read is queued now, behind the write and ahead of this device's
        // next write or release and of every poll, and the chain does not wait for it.
        this.confirm(id);
      } catch (e) {
        this.stats.writes_failed++;
        const msg = errorMessage(e);
        this.deps.log.warn({ device_id: id, action: want.action, err: msg }, "dispatch write failed");
        for (const row of rows) {
          const dp = row.progress.devices[id];
          if (!dp) continue;
          dp.writes_failed++;
          dp.error = `${want.action}: ${msg}`;
        }
        const a = this.applied.get(id);
        if (a && a.key === key) a.failed = true;
      }
    });
  }

  /**
   * One read of the device's power in the control lane right after a setpoint write. It
   * goes to the latest values (in the device layer) and, as one more sample, to the
   * measurement of the running events whose kind takes it (kinds/kind.ts `confirmed`),
   * stamped when the answer arrived: never earlier than the device was seen at its
   * setpoint. A failure is logged and counted; the write stands.
   */
  private confirm(id: string): void {
    const d = this.deps.devices.get(id);
    if (!d || this.confirming.has(id)) return;
    this.confirming.add(id);
    const warn = (e: unknown) =>
      this.deps.log.warn(
        { device_id: id, err: errorMessage(e) },
        "confirmation read after a setpoint write failed; the next poll reads the device",
      );
    void confirmRead(d) // queued on the device's bus before this returns
      .then(
        (metrics) => {
          this.stats.confirms_ok++;
          if (Object.keys(metrics).length) this.confirmed(id, metrics, this.deps.clock.now());
        },
        (e: unknown) => {
          this.stats.confirms_failed++;
          warn(e);
        },
      )
      .finally(() => this.confirming.delete(id));
  }

  /**
   * A confirmation reading for the live events that drive the device and whose kind takes
   * it; their coverage gets a sample at the same instant, so the driven time and the
   * delivered quantity start counting at the same moment.
   */
  private confirmed(id: string, metrics: Record<string, number>, at: number): void {
    let ctx: KindContext | undefined;
    for (const row of this.running) {
      if (row.spec.mode === "test" || row.state !== "running") continue;
      const kind = kindOf(row.spec.event_type);
      if (!kind.confirmed || !(this.claimed.get(row.spec.event_id) ?? []).includes(id)) continue;
      if (at < (row.progress.window_from ?? Math.max(row.spec.start_ms, row.created_at))) continue;
      try {
        ctx ??= this.ctx(at);
        kind.confirmed(row, ctx, id, metrics, at);
        if (this.sampleCoverage(row, ctx, at)) this.deps.save(row);
      } catch (e) {
        this.deps.log.error({ event_id: row.spec.event_id, device_id: id, err: errorMessage(e) }, "cannot take a confirmation reading");
      }
    }
  }

  /** One coverage sample of a live event; true when it is the first that finds it driving. */
  private sampleCoverage(row: EventRow, ctx: KindContext, ts: number): boolean {
    const p = row.progress;
    const kind = kindOf(row.spec.event_type);
    const driving = kind.driving
      ? kind.driving(row, ctx)
      : (this.claimed.get(row.spec.event_id) ?? []).some((id) => (p.devices[id]?.writes_ok ?? 0) > 0);
    const first = driving && !p.driven?.value;
    p.driven = addSample(p.driven, ts, driving ? 1 : 0, this.hold, p.resumed_at);
    return first;
  }

  private verify(id: string, pre: PreState, done: (mismatch: string | undefined) => void): void {
    this.jobs.chain(id, async () => {
      try {
        done(await this.ledger.verify(id, pre));
      } catch (e) {
        done(`cannot read back: ${errorMessage(e)}`);
      }
    });
  }

  /** A poll snapshot: baselines, each live event's measurement and coverage, then a new plan (unless `write` is false: a read-back, gap-readback.ts). */
  observe(snap: Snapshot, running: readonly EventRow[], now: number, write = true): void {
    const ts = snap.ts;
    const devs = planned(this.deps.devices);
    this.devs = this.usable(devs);
    this.running = running;
    const byId = new Map(snap.devices.map((d) => [d.device_id, d.metrics]));
    this.history.add(byId, ts);
    const ctx = this.ctx(now);
    let any = false;
    const first: EventRow[] = [];
    for (const row of running) {
      if (row.spec.mode === "test" || row.state !== "running") continue;
      any = true;
      const p = row.progress;
      p.window_from ??= Math.max(row.spec.start_ms, row.created_at);
      if (ts < p.window_from) continue;
      const kind = kindOf(row.spec.event_type);
      kind.observe?.(row, ctx, byId, ts);
      if (this.sampleCoverage(row, ctx, ts)) first.push(row);
    }
    // The first measured sample of an event is committed at once (a kill -9 soon after
    // start loses no more than the hold time), the rest every 10 s (SD card wear).
    for (const row of first) this.deps.save(row);
    if (any && now - this.lastSave >= PROGRESS_SAVE_MS) {
      this.lastSave = now;
      for (const row of running) if (row.state === "running") this.deps.save(row);
    }
    if (write) this.reconcile(running, now, devs);
  }

  /** The execution response (B4), measured by the event's kind. */
  result(row: EventRow, until: number, cancelled: boolean, now: number): ExecutionResponse {
    return executionResponse(row, this.ctx(now), this.devs, { until, cancelled, now });
  }

  /** `sitegate devices release ID`: the release tried at once, whatever its backoff; what became of it. */
  releaseNow(id: string): Promise<string> {
    const running = new Set(this.running.filter((r) => r.state === "running").map((r) => r.spec.event_id));
    return this.jobs.releaseNow(
      id,
      (this.ledger.get(id)?.holders ?? []).filter((h) => running.has(h)),
    );
  }

  /** `sitegate devices release ID --forget`: the row dropped (the operator put the device back by hand). */
  forget(id: string): string {
    const l = this.ledger.get(id);
    if (!l) return "the ledger holds nothing for it";
    // Dropped under a running event, its next write would capture the state that event drove as its "before".
    const driving = l.holders.filter((h) => this.running.some((r) => r.spec.event_id === h && r.state === "running"));
    if (driving.length && l.unreleased === undefined) return `not forgotten: driven by event ${driving.join(", ")}`;
    this.ledger.forget(id);
    this.jobs.backoff.clear(id);
    this.applied.delete(id);
    this.deps.devices.get(id)?.setRemote(false);
    this.deps.log.warn(
      { device_id: id, pre: l.pre, unreleased: l.unreleased },
      "ledger row dropped by the operator (devices release --forget)",
    );
    return "forgotten";
  }

  /** How many devices did not read back their release (sitegate_devices_unreleased). */
  get unreleased(): number {
    return this.ledger?.unreleased().length ?? 0;
  }

  /** Devices an event drives or holds in the ledger (taken before a cancellation ends it). */
  devicesOf(eventId: string): string[] {
    const held = this.ledger.all().filter((r) => r.holders.includes(eventId));
    return [...new Set([...(this.claimed.get(eventId) ?? []), ...held.map((r) => r.device_id)])];
  }
}
