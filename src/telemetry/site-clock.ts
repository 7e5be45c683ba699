// The site clock: its ticks, every family asked for its readings at each tick (through
// the one registry of devices, whatever the transport), and one snapshot per tick (the
// late part of a slow family, a Modbus bus that finished after the next tick, as its own,
// with its tick's time). How each family reads (the Modbus buses' polling and back-off)
// is the family's. Why a tick works so: docs/telemetry.md ("Poller") and
// docs/partner-api.md (a data-push payload is one tick).
import type { MetricFamily, Part, PartHealth } from "../lifecycle.js";
import type { Logger } from "../log.js";
import { errorMessage } from "../errors.js";
import type { Reading } from "../devices/family.js";
import type { SiteDevices } from "../devices/directory.js";
import type { DeviceHealth, Metrics } from "../model/device.js";
import { systemClock, type Clock } from "../util/clock.js";
import type { Snapshot, SnapshotSink } from "./types.js";
import { nextTickAt, tickOffsetMs } from "./tick-offset.js";

export interface SiteClockOptions {
  intervalMs: number;
  log: Logger;
  /** The site's ticks fall at this site's stable offset into each interval (tick-offset.ts); none: on the interval grid. */
  siteId?: string;
  /** Wall clock and timers of the ticks (tests inject a fake one). */
  clock?: Clock;
}

interface Tick {
  ts: number;
  /** Parts of families that have not arrived yet. */
  waiting: number;
  devices: Reading[];
  committed: boolean;
  /** Devices read but not stored nor pushed (not fully configured: REGISTRY_WRITE_FAILED). */
  unstored: ReadonlySet<string>;
}

/** Where the readings come from: every family, through the one registry of devices. */
export type TickSource = Pick<SiteDevices, "read" | "list" | "get">;

export class SiteClock implements Part {
  /** The part's name predates the split of the Modbus polling from the clock: metrics and logs keep it. */
  readonly name = "poller";
  /** Parts of ticks that have not arrived yet (stop() lets them finish). */
  private readonly pending = new Set<Promise<unknown>>();
  private open: Tick[] = [];
  private timer: unknown = null;
  private nextTickAt = 0;
  private stopped = true;
  /** The tick time of each device's latest reading. */
  private readonly readAt = new Map<string, number>();
  private readonly clock: Clock;
  /** Where in each interval this site's ticks fall (ms after the UTC interval grid). */
  readonly offsetMs: number;
  /** readings: device readings the ticks took, every family's. */
  readonly stats = { ticks: 0, snapshots: 0, late_snapshots: 0, readings: 0, store_errors: 0 };

  constructor(
    private readonly source: TickSource,
    private readonly sink: SnapshotSink,
    private readonly opts: SiteClockOptions,
  ) {
    this.clock = opts.clock ?? systemClock;
    this.offsetMs = opts.siteId === undefined ? 0 : tickOffsetMs(opts.siteId, opts.intervalMs);
  }

  start(): void {
    this.stopped = false;
    this.nextTickAt = nextTickAt(this.clock.now(), this.opts.intervalMs, this.offsetMs);
    this.arm();
  }

  /** Sets the timer for the next tick of the site clock (a multiple of the interval, plus the site's offset). */
  private arm(): void {
    if (this.stopped) return;
    const now = this.clock.now();
    const iv = this.opts.intervalMs;
    // A wall-clock step (NTP) or a stall over a whole interval: go on from the next tick
    // after now, not from a stale schedule (no burst of catch-up ticks, no long wait after
    // a step back). Timers may fire a little early against Date.now(), so the next tick
    // may be up to one interval plus that much ahead: only more than that is a step.
    if (this.nextTickAt <= now - iv || this.nextTickAt > now + 2 * iv) this.nextTickAt = nextTickAt(now, iv, this.offsetMs);
    this.timer = this.clock.setTimer(() => this.tick(), Math.max(0, this.nextTickAt - now));
  }

  private tick(): void {
    if (this.stopped) return;
    const ts = this.nextTickAt;
    this.nextTickAt = ts + this.opts.intervalMs;
    this.stats.ticks++;
    // The deadline of every earlier tick is this one: commit them with what arrived.
    for (const t of this.open) this.commit(t);
    this.open = [];
    const unstored = new Set(this.source.list().flatMap((d) => (d.info().fully_configured === false ? [d.id] : [])));
    const tick: Tick = { ts, waiting: 0, devices: [], committed: false, unstored };
    for (const part of this.parts(ts)) {
      if (!(part.readings instanceof Promise)) {
        this.take(tick, tick.devices, part.readings);
        continue;
      }
      tick.waiting++;
      const run = part.readings.then(
        (readings) => this.arrived(tick, part.source, readings),
        (e: unknown) => {
          this.opts.log.error({ source: part.source, err: errorMessage(e) }, "cannot take a family's readings");
          this.arrived(tick, part.source, []);
        },
      );
      this.pending.add(run);
      void run.finally(() => this.pending.delete(run));
    }
    if (tick.waiting > 0) this.open.push(tick);
    else this.commit(tick);
    this.arm();
  }

  /** Every family's parts of the tick; a family that throws is logged and left out of it. */
  private parts(ts: number): ReturnType<TickSource["read"]> {
    try {
      return this.source.read(ts);
    } catch (e) {
      this.opts.log.error({ err: errorMessage(e) }, "cannot take the devices' readings");
      return [];
    }
  }

  private arrived(tick: Tick, source: string, readings: readonly Reading[]): void {
    if (tick.committed && this.stopped) return; // the store may be closed already
    if (tick.committed) {
      // Finished after its tick's deadline: its readings keep their tick's time.
      const late: Reading[] = [];
      this.take(tick, late, readings);
      if (late.length) this.store({ ts: tick.ts, devices: late }, source, true);
      return;
    }
    this.take(tick, tick.devices, readings);
    if (--tick.waiting === 0) this.commit(tick);
  }

  /** A tick's readings into its snapshot: a device not fully configured is read (latestAt) but not stored. */
  private take(tick: Tick, into: Reading[], readings: readonly Reading[]): void {
    for (const r of readings) {
      if (Object.keys(r.metrics).length === 0) continue;
      this.readAt.set(r.device_id, Math.max(tick.ts, this.readAt.get(r.device_id) ?? tick.ts));
      this.stats.readings++;
      if (!tick.unstored.has(r.device_id)) into.push(r);
    }
  }

  private commit(t: Tick): void {
    if (t.committed) return;
    t.committed = true;
    if (t.devices.length) this.store({ ts: t.ts, devices: t.devices }, undefined, false);
    // Bounded: the ids of devices gone from the site are forgotten.
    if (this.readAt.size > this.source.list().length) {
      const ids = new Set(this.source.list().map((d) => d.id));
      for (const id of [...this.readAt.keys()]) if (!ids.has(id)) this.readAt.delete(id);
    }
  }

  private store(snap: Snapshot, source: string | undefined, late: boolean): void {
    try {
      this.sink.append(snap);
      this.stats.snapshots++;
      if (late) this.stats.late_snapshots++;
    } catch (e) {
      this.stats.store_errors++;
      this.opts.log.error({ err: errorMessage(e), ...(source ? { source } : {}) }, "cannot store samples");
    }
  }

  /** Without an id, the part's own health: none of its own to report, /healthz lists each device's. */
  health(): PartHealth;
  health(deviceId: string): DeviceHealth | undefined;
  health(deviceId?: string): DeviceHealth | PartHealth | undefined {
    if (deviceId === undefined) return { warnings: [] };
    return this.source.get(deviceId)?.health();
  }

  /** The latest value of every metric a device gave, whatever its family (for diagnostics and tests). */
  latest(deviceId: string): Metrics | undefined {
    return this.source.get(deviceId)?.latest();
  }

  /** The tick time (UTC ms) of the latest reading of a device. */
  latestAt(deviceId: string): number | undefined {
    return this.readAt.get(deviceId);
  }

  metrics(): MetricFamily[] {
    const devices = this.source.list();
    const perDevice = (value: (h: DeviceHealth) => number) =>
      devices.map((d) => ({ labels: { device_id: d.id }, value: value(d.health()) }));
    const s = this.stats;
    return [
      {
        name: "sitegate_device_online",
        help: "1 when the last read of the device succeeded",
        type: "gauge",
        values: perDevice((h) => (h.online ? 1 : 0)),
      },
      {
        name: "sitegate_device_consecutive_failures",
        help: "failed reads in a row",
        type: "gauge",
        values: perDevice((h) => h.consecutive_failures),
      },
      { name: "sitegate_poll_snapshots_total", help: "poll-cycle snapshots stored", type: "counter", values: [{ value: s.snapshots }] },
      {
        name: "sitegate_poll_late_snapshots_total",
        help: "snapshots of a bus that finished after its tick's deadline (stored on their own with the tick's time)",
        type: "counter",
        values: [{ value: s.late_snapshots }],
      },
    ];
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== null) this.clock.clearTimer(this.timer);
    // Let ticks in flight finish (their reads fail fast once the buses close), within 2 s.
    const settle = Promise.allSettled([...this.pending]);
    let t: NodeJS.Timeout | undefined;
    await Promise.race([settle, new Promise((r) => (t = setTimeout(r, 2000)))]);
    clearTimeout(t);
    for (const tk of this.open) this.commit(tk);
    this.open = [];
  }
}
