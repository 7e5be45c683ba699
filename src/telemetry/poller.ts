// The poller: one loop per bus, each on the poll interval, reading every due device of
// that bus (power-class points every tick, energy counters every slow interval) and
// handing the tick's readings to the sample store as one snapshot stamped with the read
// time. A failed read gives no sample; a device that keeps failing is backed off
// (1 tick, 2, 4 ... up to 60 s) so it costs the others at most one timeout per cycle;
// one device's error never stops the others. Per-device health feeds device sync.
import type { Part } from "../lifecycle.js";
import type { Logger } from "../log.js";
import { errorMessage } from "../errors.js";
import type { DeviceDriver, PointClass } from "../devices/driver.js";
import type { DriverPool } from "../devices/pool.js";
import type { DeviceHealth, DeviceSource, HealthView, OpMode, RegisteredDevice } from "../devices/types.js";
import type { Metrics, SnapshotSink } from "./types.js";

const MAX_BACKOFF_MS = 60_000;

interface Polled {
  device: RegisteredDevice;
  driver: DeviceDriver;
  health: DeviceHealth;
  lastSlowAt: number;
  nextTryAt: number;
  latest: Metrics;
}

export interface PollerOptions {
  intervalMs: number;
  log: Logger;
}

/** SunSpec inverter state (St) to device sync's device_op_mode. */
export function opModeFromState(state: number | undefined, online: boolean): OpMode {
  if (!online) return 0;
  switch (state) {
    case 3: case 4: case 5: return 1; // starting, MPPT, throttled: running on its own
    case 1: case 2: case 6: case 8: return 3; // off, sleeping, shutting down, standby
    case 7: return 4; // fault
    default: return 0;
  }
}

export class Poller implements Part, HealthView {
  readonly name = "poller";
  private devices = new Map<string, Polled>();
  private loops = new Map<string, { timer: NodeJS.Timeout | null; running: boolean }>();
  private unsubscribe: (() => void) | null = null;
  private stopped = true;
  private remote = new Set<string>();
  readonly stats = { ticks: 0, snapshots: 0, reads_ok: 0, reads_failed: 0, store_errors: 0 };

  constructor(
    private readonly source: DeviceSource,
    private readonly sink: SnapshotSink,
    private readonly pool: DriverPool,
    private readonly opts: PollerOptions,
  ) {}

  start(): void {
    this.stopped = false;
    this.unsubscribe = this.source.onChange(() => this.sync());
    this.sync();
  }

  /** Rebuilds the device set from the registry; starts a loop for each new bus. */
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
      next.set(device.config.device_id, old && old.driver === driver
        ? { ...old, device }
        : { device, driver, health: { online: false, last_ok_at: null, last_error: null, consecutive_failures: 0, op_mode: 0 }, lastSlowAt: -Infinity, nextTryAt: 0, latest: {} });
    }
    this.devices = next;
    for (const p of next.values()) {
      if (!this.loops.has(p.driver.bus.key)) {
        const loop = { timer: null, running: false };
        this.loops.set(p.driver.bus.key, loop);
        this.schedule(p.driver.bus.key, 0);
      }
    }
  }

  private schedule(busKey: string, delayMs: number): void {
    const loop = this.loops.get(busKey);
    if (!loop || this.stopped) return;
    loop.timer = setTimeout(() => void this.tick(busKey), Math.max(0, delayMs));
  }

  private async tick(busKey: string): Promise<void> {
    const loop = this.loops.get(busKey);
    if (!loop || this.stopped) return;
    const started = performance.now();
    const ts = Date.now();
    loop.running = true;
    this.stats.ticks++;
    const members = [...this.devices.values()].filter((p) => p.driver.bus.key === busKey);
    if (members.length === 0) {
      this.loops.delete(busKey);
      loop.running = false;
      return;
    }
    // All reads go into the bus queue at once; the bus serializes them.
    const results = await Promise.all(members.map((p) => this.pollOne(p, started)));
    const devices = results.filter((r): r is { device_id: string; metrics: Metrics } => r !== null && Object.keys(r.metrics).length > 0);
    if (devices.length && !this.stopped) {
      try {
        this.sink.append({ ts, devices });
        this.stats.snapshots++;
      } catch (e) {
        this.stats.store_errors++;
        this.opts.log.error({ err: errorMessage(e), bus: busKey }, "cannot store samples");
      }
    }
    loop.running = false;
    const elapsed = performance.now() - started;
    // The next tick starts one interval after this one started; an overrun starts it at once.
    this.schedule(busKey, this.opts.intervalMs - elapsed);
  }

  private async pollOne(p: Polled, now: number): Promise<{ device_id: string; metrics: Metrics } | null> {
    if (now < p.nextTryAt) return null;
    const id = p.device.config.device_id;
    const slowDue = now - p.lastSlowAt >= p.driver.profile.slow_interval_ms;
    const classes: PointClass[] = slowDue ? ["fast", "slow"] : ["fast"];
    try {
      // A device that is failing gets one try without retries: it costs one timeout.
      const metrics = await p.driver.read(classes, undefined, p.health.consecutive_failures > 0 ? 0 : 1);
      if (slowDue) p.lastSlowAt = now;
      const wasOffline = !p.health.online;
      p.health = {
        online: true, last_ok_at: new Date().toISOString(), last_error: null, consecutive_failures: 0,
        op_mode: this.remote.has(id) ? 2 : opModeFromState(metrics.state, true),
      };
      p.nextTryAt = 0;
      p.latest = { ...p.latest, ...metrics };
      this.stats.reads_ok++;
      if (wasOffline) this.opts.log.info({ device_id: id }, "device online");
      return { device_id: id, metrics };
    } catch (e) {
      const failures = p.health.consecutive_failures + 1;
      const backoff = Math.min(MAX_BACKOFF_MS, this.opts.intervalMs * 2 ** (failures - 1));
      p.nextTryAt = now + backoff;
      if (p.health.online || failures === 1) this.opts.log.warn({ device_id: id, err: errorMessage(e), retry_in_ms: backoff }, "device read failed");
      p.health = { online: false, last_ok_at: p.health.last_ok_at, last_error: errorMessage(e), consecutive_failures: failures, op_mode: 0 };
      this.stats.reads_failed++;
      return null;
    }
  }

  health(deviceId: string): DeviceHealth | undefined {
    return this.devices.get(deviceId)?.health;
  }

  /** The latest value of every metric read from a device (for dispatch and diagnostics). */
  latest(deviceId: string): Metrics | undefined {
    return this.devices.get(deviceId)?.latest;
  }

  /** Marks a device as under remote dispatch (device_op_mode 2) or not. */
  setRemote(deviceId: string, remote: boolean): void {
    if (remote) this.remote.add(deviceId);
    else this.remote.delete(deviceId);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.unsubscribe?.();
    for (const loop of this.loops.values()) if (loop.timer) clearTimeout(loop.timer);
    // Let ticks in flight finish (their reads fail fast once the buses close).
    for (let i = 0; i < 200 && [...this.loops.values()].some((l) => l.running); i++) await new Promise((r) => setTimeout(r, 10));
    this.loops.clear();
  }
}
