// The daemon's own health: the checks behind the systemd watchdog, the READY/STATUS/
// STOPPING notifications, and the onHealthy() hook (for the updater: a new version counts
// as good once it is READY, its database commits and, where devices exist, a first poll
// succeeded). WATCHDOG=1 is sent only while every check passes:
//   - the event loop is not stalled (the tick is not late, and no delay since the last
//     tick exceeded the stall bound: monitorEventLoopDelay catches blocks between ticks);
//   - the database commits (a one-row write in a transaction, with a short busy timeout);
//   - every bus that has work completed a request within the stuck bound.
// When a check fails the ping is withheld and STATUS says why, so `systemctl status`
// shows the reason before the watchdog restarts the service.
import { monitorEventLoopDelay } from "node:perf_hooks";
import type { MetricFamily, Part, PartHealth } from "./lifecycle.js";
import type { Logger } from "./log.js";
import type { ModuleMigrations } from "./storage/db.js";
import type { StoragePart } from "./storage/part.js";
import { errorMessage } from "./errors.js";
import type { SystemdNotifier } from "./systemd/notify.js";

export const HEALTH_MIGRATIONS: ModuleMigrations = {
  module: "health",
  migrations: [{ version: 1, sql: "CREATE TABLE health_probe (id INTEGER PRIMARY KEY CHECK (id = 1), at INTEGER NOT NULL)" }],
};

/** What the monitor looks at; each a cheap in-memory read (the db probe aside). */
/**
 * A part's successful commit this recent stands for the health check's own write probe.
 * Longer than the longest telemetry commit interval (60 s) and a poll, so that a gateway
 * committing telemetry never writes a probe row as well (the SD card).
 */
const PROBE_WINDOW_MS = 65_000;

export interface HealthSources {
  storage: StoragePart;
  /** Every bus: `busy` while a request runs, `queued` requests waiting, `busy_ms` grows as requests finish. */
  buses(): Array<{ key: string; busy: boolean; queued: number; stats: { busy_ms: number } }>;
  devices(): { configured: number; online: number };
  /** Successful device reads since start. */
  readsOk(): number;
  /** Callbacks waiting in the delivery log and telemetry snapshots not yet accepted by the partner. */
  backlog(): { outbox: number; snapshots: number };
}

export interface HealthOptions {
  /** Loop stall bound; default half the tick, at least 250 ms, at most 5 s. */
  stallMs?: number;
  /** A bus with work and no finished request for this long is stuck; default 30 s. */
  busStuckMs?: number;
  /** Tick without a watchdog (STATUS refresh); default 10 s. */
  statusEveryMs?: number;
}

export interface CheckResult {
  ok: boolean;
  /** Why not, one short phrase each, e.g. "event loop stalled 3012 ms". */
  failures: string[];
}

export type HealthyCallback = () => void | Promise<void>;

export class HealthMonitor implements Part {
  readonly name = "health";
  readonly stats = { pings: 0, withheld: 0, last_failures: [] as string[] };
  private eventsRunning: () => number = () => 0;
  private readonly healthyCallbacks = new Set<HealthyCallback>();
  private healthy = false;
  private ready = false;
  private timer: NodeJS.Timeout | null = null;
  private healthyTimer: NodeJS.Timeout | null = null;
  private lastTickAt = 0;
  private delay: ReturnType<typeof monitorEventLoopDelay> | null = null;
  private readonly busProgress = new Map<string, { busyMs: number; at: number }>();
  readonly tickMs: number;
  private readonly stallMs: number;
  private readonly busStuckMs: number;

  constructor(
    private readonly src: HealthSources,
    private readonly notifier: SystemdNotifier,
    private readonly log: Logger,
    opts: HealthOptions = {},
  ) {
    // systemd's advice: ping at half the watchdog interval.
    this.tickMs = notifier.watchdogMs > 0 ? Math.max(100, Math.floor(notifier.watchdogMs / 2)) : (opts.statusEveryMs ?? 10_000);
    this.stallMs = opts.stallMs ?? Math.min(5000, Math.max(250, Math.floor(this.tickMs / 2)));
    this.busStuckMs = opts.busStuckMs ?? 30_000;
  }

  /** Where the number of running dispatch events comes from (the dispatcher sets it). */
  setEventsRunning(source: () => number): void {
    this.eventsRunning = source;
  }

  /**
   * Calls `cb` once the daemon is healthy: READY sent, the database commits, and, if any
   * device is configured, at least one poll succeeded. At once if that has happened already.
   * Returns a function that removes the callback.
   */
  onHealthy(cb: HealthyCallback): () => void {
    if (this.healthy) {
      this.fire(cb);
      return () => {};
    }
    this.healthyCallbacks.add(cb);
    return () => this.healthyCallbacks.delete(cb);
  }

  get isHealthy(): boolean {
    return this.healthy;
  }

  /** The checks that failed at the last tick, while the watchdog ping is withheld. */
  health(): PartHealth {
    const failures = this.stats.last_failures;
    if (failures.length === 0) return { warnings: [] };
    return { warnings: [{ code: "health_checks_failing", message: `watchdog ping withheld: ${failures.join(", ")}` }] };
  }

  metrics(): MetricFamily[] {
    return [
      {
        name: "sitegate_watchdog_pings_total",
        help: "health ticks whose checks passed (WATCHDOG=1 under systemd)",
        type: "counter",
        values: [{ value: this.stats.pings }],
      },
      {
        name: "sitegate_watchdog_withheld_total",
        help: "health ticks whose checks failed (ping withheld)",
        type: "counter",
        values: [{ value: this.stats.withheld }],
      },
    ];
  }

  /** Runs every check now. */
  check(now = performance.now()): CheckResult {
    const failures: string[] = [];
    const late = this.lastTickAt ? now - this.lastTickAt - this.tickMs : 0;
    const maxDelay = this.delay ? this.delay.max / 1e6 : 0;
    this.delay?.reset();
    const stall = Math.max(late, maxDelay);
    if (stall > this.stallMs) failures.push(`event loop stalled ${Math.round(stall)} ms`);
    const db = this.probeDatabase(now);
    if (db) failures.push(`database: ${db}`);
    for (const bus of this.src.buses()) {
      const p = this.busProgress.get(bus.key);
      if (!p || p.busyMs !== bus.stats.busy_ms || (!bus.busy && bus.queued === 0)) {
        this.busProgress.set(bus.key, { busyMs: bus.stats.busy_ms, at: now });
      } else if (now - p.at > this.busStuckMs) {
        failures.push(`bus ${bus.key} stuck ${Math.round((now - p.at) / 1000)} s`);
      }
    }
    return { ok: failures.length === 0, failures };
  }

  /**
   * Null when the database takes writes, else the reason: a part's commit within the last
   * PROBE_WINDOW_MS (and no failed one since) says so; otherwise one tiny committed write
   * (a WAL page and the -shm pages, so not on every tick of a gateway that commits
   * telemetry anyway: the SD card).
   */
  private probeDatabase(now: number): string | null {
    const last = this.src.storage.lastCommitAt;
    if (last > 0 && now - last <= Math.max(PROBE_WINDOW_MS, 2 * this.tickMs)) return null;
    try {
      const db = this.src.storage.db;
      // A locked database must not hold the event loop for the usual 2 s busy timeout.
      db.pragma("busy_timeout = 200");
      try {
        db.transaction(() =>
          db.prepare("INSERT INTO health_probe (id, at) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET at = excluded.at").run(Date.now()),
        )();
      } finally {
        db.pragma("busy_timeout = 2000");
      }
      return null;
    } catch (e) {
      return (e as { code?: string }).code ?? errorMessage(e);
    }
  }

  /** The one-line summary for STATUS=. */
  summary(): string {
    const d = this.src.devices();
    const b = this.src.backlog();
    let events = 0;
    try {
      events = this.eventsRunning();
    } catch {
      events = 0;
    }
    return `${d.online}/${d.configured} devices online, ${events} events running, outbox ${b.outbox}, ${b.snapshots} snapshots to push`;
  }

  /** Every part has started: READY=1, then the watchdog (or STATUS refresh) ticks. */
  start(): void {
    this.delay = monitorEventLoopDelay({ resolution: 20 });
    this.delay.enable();
    this.ready = true;
    this.lastTickAt = performance.now();
    void this.notifier.send({ READY: 1, STATUS: this.summary() });
    this.log.info({ watchdog_ms: this.notifier.watchdogMs || null, notify: this.notifier.enabled }, "ready");
    this.timer = setInterval(() => this.tick(), this.tickMs);
    this.timer.unref();
    this.healthyTimer = setInterval(() => this.checkHealthy(), 250);
    this.healthyTimer.unref();
  }

  private tick(): void {
    const now = performance.now();
    const r = this.check(now);
    this.lastTickAt = performance.now();
    const status = this.summary();
    if (r.ok) {
      this.stats.pings++;
      if (this.stats.last_failures.length) this.log.info("health checks pass again; watchdog pings resume");
      this.stats.last_failures = [];
      if (this.notifier.watchdogMs > 0) void this.notifier.send({ WATCHDOG: 1, STATUS: status });
      else void this.notifier.send({ STATUS: status });
    } else {
      this.stats.withheld++;
      if (r.failures.join() !== this.stats.last_failures.join())
        this.log.error({ failures: r.failures }, "health check failed; watchdog ping withheld");
      this.stats.last_failures = r.failures;
      void this.notifier.send({ STATUS: `${status}; watchdog withheld: ${r.failures.join(", ")}` });
    }
  }

  private checkHealthy(): void {
    if (this.healthy || !this.ready) return;
    const d = this.src.devices();
    if (d.configured > 0 && this.src.readsOk() === 0) return;
    if (this.probeDatabase(performance.now()) !== null) return;
    this.healthy = true;
    if (this.healthyTimer) clearInterval(this.healthyTimer);
    this.healthyTimer = null;
    this.log.info("healthy: ready, database commits, devices polled");
    for (const cb of this.healthyCallbacks) this.fire(cb);
    this.healthyCallbacks.clear();
  }

  private fire(cb: HealthyCallback): void {
    Promise.resolve()
      .then(cb)
      .catch((e) => this.log.error({ err: errorMessage(e) }, "onHealthy callback failed"));
  }

  /** STOPPING=1 first, then the timers stop. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    if (this.healthyTimer) clearInterval(this.healthyTimer);
    this.timer = this.healthyTimer = null;
    this.delay?.disable();
    // Not waited for longer than a second: the parts must stop within the 5 s the daemon allows.
    if (this.ready) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([this.notifier.send({ STOPPING: 1, STATUS: "stopping" }), new Promise((r) => (timer = setTimeout(r, 1000)))]);
      clearTimeout(timer);
    }
    this.ready = false;
  }
}
