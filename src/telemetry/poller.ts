// The poller: the site clock's ticks, every bus reading its due devices at each tick, and
// one snapshot per tick from every bus (late readings of a slow bus as their own, with
// their tick's time); a failing device backed off; per-device health and latest values.
// Why a tick works so, and the back-off: docs/telemetry.md ("Poller") and
// docs/partner-api.md (a data-push payload is one tick).
import type { MetricFamily, Part, PartHealth } from "../lifecycle.js";
import type { Logger } from "../log.js";
import { errorMessage } from "../errors.js";
import type { DeviceDriver, PointClass } from "../modbus/device/driver.js";
import type { DriverPool } from "../modbus/device/pool.js";
import type { DeviceHealth, DeviceSource, HealthView, RegisteredDevice } from "../devices/types.js";
import type { Device } from "../model/device.js";
import type { ModbusReadings } from "../modbus/device/profile-device.js";
import type { SiteDevices } from "../devices/directory.js";
import { opModeCode } from "../model/roles.js";
import { systemClock, type Clock } from "../util/clock.js";
import type { Metrics, Snapshot, SnapshotSink } from "./types.js";
import { nextTickAt, tickOffsetMs } from "./tick-offset.js";

const MAX_BACKOFF_MS = 60_000;

interface Polled {
  device: RegisteredDevice;
  driver: DeviceDriver;
  health: DeviceHealth;
  lastSlowAt: number;
  nextTryAt: number;
  latest: Metrics;
  /** Tick time of the latest successful reading. */
  latestAt: number | undefined;
  /** A reading taken outside the poll (see confirm()) and when it arrived (performance.now()). */
  confirmed?: { metrics: Metrics; at: number };
}

export interface PollerOptions {
  intervalMs: number;
  log: Logger;
  /**
   * Devices on other transports (Zigbee, GPIO) that report on their own: their latest
   * readings join each tick's snapshot, and their health and latest values are answered here too.
   */
  local?: Pick<SiteDevices, "readings" | "reporting">;
  /** The site's ticks fall at this site's stable offset into each interval (tick-offset.ts); none: on the interval grid. */
  siteId?: string;
  /** Wall clock and timers of the ticks (tests inject a fake one). */
  clock?: Clock;
}

interface Tick {
  ts: number;
  /** Buses that started this tick and have not finished it. */
  waiting: Set<string>;
  devices: Array<{ device_id: string; metrics: Metrics }>;
  committed: boolean;
}

export class Poller implements Part, HealthView, ModbusReadings {
  readonly name = "poller";
  private devices = new Map<string, Polled>();
  /** Buses in the middle of a tick (they skip the ticks that come while they are busy). */
  private busy = new Map<string, Promise<void>>();
  private open: Tick[] = [];
  private timer: unknown = null;
  private nextTickAt = 0;
  private stopped = true;
  private remote = new Set<string>();
  private readonly clock: Clock;
  /** Where in each interval this site's ticks fall (ms after the UTC interval grid). */
  readonly offsetMs: number;
  readonly stats = { ticks: 0, snapshots: 0, late_snapshots: 0, skipped_bus_ticks: 0, reads_ok: 0, reads_failed: 0, store_errors: 0 };

  constructor(
    private readonly source: DeviceSource,
    private readonly sink: SnapshotSink,
    private readonly pool: DriverPool,
    private readonly opts: PollerOptions,
  ) {
    this.clock = opts.clock ?? systemClock;
    this.offsetMs = opts.siteId === undefined ? 0 : tickOffsetMs(opts.siteId, opts.intervalMs);
  }

  start(): void {
    this.stopped = false;
    this.sync();
    this.nextTickAt = nextTickAt(this.clock.now(), this.opts.intervalMs, this.offsetMs);
    this.arm();
  }

  /** The registry changed (its `devices_changed`): the next tick polls what it holds now. */
  devicesChanged(): void {
    if (!this.stopped) this.sync();
  }

  /** Rebuilds the device set from the registry; the next tick polls what it holds. */
  private sync(): void {
    const next = new Map<string, Polled>();
    for (const device of this.source.list()) {
      let driver: DeviceDriver;
      try {
        driver = this.pool.driverFor(device.config);
      } catch (e) {
        this.opts.log.error({ device_id: device.config.device_id, err: errorMessage(e) }, "cannot poll device");
        continue;
      }
      const old = this.devices.get(device.config.device_id);
      next.set(
        device.config.device_id,
        old && old.driver === driver
          ? { ...old, device }
          : {
              device,
              driver,
              health: { online: false, last_ok_at: null, last_error: null, consecutive_failures: 0, op_mode: opModeCode("unknown") },
              lastSlowAt: -Infinity,
              nextTryAt: 0,
              latest: {},
              latestAt: undefined,
            },
      );
    }
    this.devices = next;
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
    const started = performance.now();
    const byBus = new Map<string, Polled[]>();
    for (const p of this.devices.values()) {
      const k = p.driver.bus.key;
      let list = byBus.get(k);
      if (!list) byBus.set(k, (list = []));
      list.push(p);
    }
    const tick: Tick = { ts, waiting: new Set(), devices: this.localReadings(), committed: false };
    for (const [bus, members] of byBus) {
      if (this.busy.has(bus)) {
        this.stats.skipped_bus_ticks++;
        continue;
      }
      tick.waiting.add(bus);
      const run = this.pollBus(members, started, ts).then((devices) => {
        this.busy.delete(bus);
        if (tick.committed && this.stopped) return; // the store may be closed already
        if (tick.committed) {
          // Finished after its tick's deadline: its readings keep their tick's time.
          if (devices.length) this.store({ ts, devices }, bus, true);
          return;
        }
        tick.devices.push(...devices);
        tick.waiting.delete(bus);
        if (tick.waiting.size === 0) this.commit(tick);
      });
      this.busy.set(bus, run);
    }
    if (tick.waiting.size > 0) this.open.push(tick);
    else this.commit(tick);
    this.arm();
  }

  private localReadings(): Array<{ device_id: string; metrics: Metrics }> {
    try {
      return this.opts.local?.readings() ?? [];
    } catch (e) {
      this.opts.log.error({ err: errorMessage(e) }, "cannot take the local devices' readings");
      return [];
    }
  }

  private commit(t: Tick): void {
    if (t.committed) return;
    t.committed = true;
    if (t.devices.length) this.store({ ts: t.ts, devices: t.devices }, undefined, false);
  }

  private store(snap: Snapshot, bus: string | undefined, late: boolean): void {
    try {
      this.sink.append(snap);
      this.stats.snapshots++;
      if (late) this.stats.late_snapshots++;
    } catch (e) {
      this.stats.store_errors++;
      this.opts.log.error({ err: errorMessage(e), ...(bus ? { bus } : {}) }, "cannot store samples");
    }
  }

  /** One bus's reads of one tick; resolves with the devices that go into the snapshot. */
  private async pollBus(members: Polled[], started: number, ts: number): Promise<Array<{ device_id: string; metrics: Metrics }>> {
    // All reads go into the bus queue at once; the bus serializes them.
    const results = await Promise.all(members.map((p) => this.pollOne(p, started, ts)));
    const out: Array<{ device_id: string; metrics: Metrics }> = [];
    members.forEach((p, i) => {
      const r = results[i];
      if (r && Object.keys(r.metrics).length > 0 && p.device.fully_configured !== false) out.push(r);
    });
    return out;
  }

  private async pollOne(p: Polled, now: number, ts: number): Promise<{ device_id: string; metrics: Metrics } | null> {
    if (now < p.nextTryAt) return null;
    const id = p.device.config.device_id;
    const slowDue = now - p.lastSlowAt >= p.driver.profile.slow_interval_ms;
    const classes: PointClass[] = slowDue ? ["fast", "slow"] : ["fast"];
    const readFrom = performance.now();
    try {
      // A device that is failing gets one try without retries: it costs one timeout.
      const metrics = await p.driver.read(classes, undefined, p.health.consecutive_failures > 0 ? 0 : 1);
      if (slowDue) p.lastSlowAt = now;
      const wasOffline = !p.health.online;
      p.health = {
        online: true,
        last_ok_at: new Date().toISOString(),
        last_error: null,
        consecutive_failures: 0,
        op_mode: this.remote.has(id) ? opModeCode("remote") : p.driver.opMode(metrics),
      };
      p.nextTryAt = 0;
      // A confirmation that arrived while this read was under way may be the newer value
      // (the control lane jumps ahead of a poll's later blocks): it stays until the next poll.
      const newer = p.confirmed && p.confirmed.at > readFrom ? p.confirmed.metrics : {};
      p.latest = { ...p.latest, ...metrics, ...newer };
      p.latestAt = ts;
      this.stats.reads_ok++;
      if (wasOffline) this.opts.log.info({ device_id: id }, "device online");
      return { device_id: id, metrics };
    } catch (e) {
      const failures = p.health.consecutive_failures + 1;
      const backoff = Math.min(MAX_BACKOFF_MS, this.opts.intervalMs * 2 ** (failures - 1));
      p.nextTryAt = now + backoff;
      if (p.health.online || failures === 1)
        this.opts.log.warn({ device_id: id, err: errorMessage(e), retry_in_ms: backoff }, "device read failed");
      p.health = {
        online: false,
        last_ok_at: p.health.last_ok_at,
        last_error: errorMessage(e),
        consecutive_failures: failures,
        op_mode: opModeCode("unknown"),
      };
      this.stats.reads_failed++;
      return null;
    }
  }

  /** Without an id, the part's own health: none of its own to report, /healthz lists each device's. */
  health(): PartHealth;
  health(deviceId: string): DeviceHealth | undefined;
  health(deviceId?: string): DeviceHealth | PartHealth | undefined {
    if (deviceId === undefined) return { warnings: [] };
    return this.devices.get(deviceId)?.health ?? this.reporting(deviceId)?.health();
  }

  metrics(): MetricFamily[] {
    const ids = [...this.source.list().map((d) => d.config.device_id), ...(this.opts.local?.reporting().map((d) => d.id) ?? [])];
    const perDevice = (value: (h: DeviceHealth | undefined) => number) =>
      ids.map((device_id) => ({ labels: { device_id }, value: value(this.health(device_id)) }));
    const s = this.stats;
    return [
      {
        name: "sitegate_device_online",
        help: "1 when the last read of the device succeeded",
        type: "gauge",
        values: perDevice((h) => (h?.online ? 1 : 0)),
      },
      {
        name: "sitegate_device_consecutive_failures",
        help: "failed reads in a row",
        type: "gauge",
        values: perDevice((h) => h?.consecutive_failures ?? 0),
      },
      { name: "sitegate_poll_snapshots_total", help: "poll-cycle snapshots stored", type: "counter", values: [{ value: s.snapshots }] },
      {
        name: "sitegate_poll_late_snapshots_total",
        help: "snapshots of a bus that finished after its tick's deadline (stored on their own with the tick's time)",
        type: "counter",
        values: [{ value: s.late_snapshots }],
      },
      {
        name: "sitegate_poll_reads_total",
        help: "device reads by result",
        type: "counter",
        values: [
          { labels: { result: "ok" }, value: s.reads_ok },
          { labels: { result: "failed" }, value: s.reads_failed },
        ],
      },
    ];
  }

  /** The latest value of every metric read from a device (for dispatch and diagnostics). */
  latest(deviceId: string): Metrics | undefined {
    return this.devices.get(deviceId)?.latest ?? this.reporting(deviceId)?.latest();
  }

  /** A device of a family that reports on its own. */
  private reporting(deviceId: string): Device | undefined {
    return this.opts.local?.reporting().find((d) => d.id === deviceId);
  }

  /**
   * A reading taken outside the poll (dispatch reads a device's power in the control lane
   * right after a setpoint write): the latest values take it at once. Snapshots, health
   * and `latestAt` stay the poll's, so the stored and pushed telemetry keeps its tick clock.
   */
  confirm(deviceId: string, metrics: Metrics): void {
    const p = this.devices.get(deviceId);
    if (!p || Object.keys(metrics).length === 0) return;
    p.latest = { ...p.latest, ...metrics };
    p.confirmed = { metrics, at: performance.now() };
  }

  /** The tick time (UTC ms) of the latest successful reading of a device. */
  latestAt(deviceId: string): number | undefined {
    return this.devices.get(deviceId)?.latestAt;
  }

  /** Marks a device as under remote dispatch (op mode remote) or not. */
  setRemote(deviceId: string, remote: boolean): void {
    if (remote) this.remote.add(deviceId);
    else this.remote.delete(deviceId);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== null) this.clock.clearTimer(this.timer);
    // Let ticks in flight finish (their reads fail fast once the buses close), within 2 s.
    const settle = Promise.allSettled([...this.busy.values()]);
    let t: NodeJS.Timeout | undefined;
    await Promise.race([settle, new Promise((r) => (t = setTimeout(r, 2000)))]);
    clearTimeout(t);
    for (const tk of this.open) this.commit(tk);
    this.open = [];
  }
}
