// The Modbus family's polling: at each tick of the site clock, every bus reads its due
// devices (one part of the tick per bus, a bus still busy with an earlier tick skips this
// one); a failing device backed off; per-device health, latest values and the remote flag.
// The site clock (telemetry/site-clock.ts) asks for the reads and makes the snapshots.
// Why a tick works so, and the back-off: docs/telemetry.md ("Poller").
import type { MetricFamily, Part, PartHealth } from "../../lifecycle.js";
import type { Logger } from "../../log.js";
import { errorMessage } from "../../errors.js";
import type { Reading, TickReadings } from "../../devices/family.js";
import type { DeviceHealth } from "../../model/device.js";
import type { DeviceSource, RegisteredDevice } from "./types.js";
import type { Metrics } from "../../model/device.js";
import { opModeCode } from "../../model/roles.js";
import type { DeviceDriver, PointClass } from "./driver.js";
import type { DriverPool } from "./pool.js";
import type { ModbusReadings } from "./profile-device.js";

const MAX_BACKOFF_MS = 60_000;

interface Polled {
  device: RegisteredDevice;
  driver: DeviceDriver;
  health: DeviceHealth;
  lastSlowAt: number;
  nextTryAt: number;
  latest: Metrics;
  /** A reading taken outside the poll (see confirm()) and when it arrived (performance.now()). */
  confirmed?: { metrics: Metrics; at: number };
}

export interface ModbusPollingOptions {
  /** The site clock's interval: the first back-off step. */
  intervalMs: number;
  log: Logger;
}

/** A lifecycle part for its counters (sitegate_poll_reads_total); the site clock drives it. */
export class ModbusPolling implements Part, ModbusReadings {
  readonly name = "modbus-polling";
  private devices = new Map<string, Polled>();
  /** The registry version the device set was built from. */
  private synced = -1;
  /** Buses in the middle of a tick (they skip the ticks that come while they are busy). */
  private readonly busy = new Set<string>();
  private readonly remote = new Set<string>();
  readonly stats = { reads_ok: 0, reads_failed: 0, skipped_bus_ticks: 0 };

  constructor(
    private readonly source: DeviceSource & { readonly version: number },
    private readonly pool: Pick<DriverPool, "driverFor">,
    private readonly opts: ModbusPollingOptions,
  ) {}

  start(): void {}
  stop(): void {}

  /** Rebuilds the device set when the registry changed; the tick reads what it holds now. */
  private sync(): void {
    if (this.synced === this.source.version) return;
    this.synced = this.source.version;
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
            },
      );
    }
    this.devices = next;
  }

  /** The tick at `ts`: one part per bus that is not still busy with an earlier tick. */
  read(_ts: number): TickReadings {
    this.sync();
    const started = performance.now();
    const byBus = new Map<string, Polled[]>();
    for (const p of this.devices.values()) {
      const k = p.driver.bus.key;
      let list = byBus.get(k);
      if (!list) byBus.set(k, (list = []));
      list.push(p);
    }
    const out: Array<TickReadings[number]> = [];
    for (const [bus, members] of byBus) {
      if (this.busy.has(bus)) {
        this.stats.skipped_bus_ticks++;
        continue;
      }
      this.busy.add(bus);
      out.push({ source: bus, readings: this.pollBus(members, started).finally(() => this.busy.delete(bus)) });
    }
    return out;
  }

  /** One bus's reads of one tick; resolves with the readings (the site clock leaves out a device not fully configured). */
  private async pollBus(members: Polled[], started: number): Promise<Reading[]> {
    // All reads go into the bus queue at once; the bus serializes them.
    const results = await Promise.all(members.map((p) => this.pollOne(p, started)));
    return results.filter((r): r is Reading => r !== null);
  }

  private async pollOne(p: Polled, now: number): Promise<Reading | null> {
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
    this.sync();
    return this.devices.get(deviceId)?.health;
  }

  /** The latest value of every metric read from a device (for dispatch and diagnostics). */
  latest(deviceId: string): Metrics | undefined {
    this.sync();
    return this.devices.get(deviceId)?.latest;
  }

  /**
   * A reading taken outside the poll (dispatch reads a device's power in the control lane
   * right after a setpoint write): the latest values take it at once. Snapshots and health
   * stay the poll's, so the stored and pushed telemetry keeps its tick clock.
   */
  confirm(deviceId: string, metrics: Metrics): void {
    this.sync();
    const p = this.devices.get(deviceId);
    if (!p || Object.keys(metrics).length === 0) return;
    p.latest = { ...p.latest, ...metrics };
    p.confirmed = { metrics, at: performance.now() };
  }

  /** Marks a device as under remote dispatch (op mode remote) or not. */
  setRemote(deviceId: string, remote: boolean): void {
    if (remote) this.remote.add(deviceId);
    else this.remote.delete(deviceId);
  }

  metrics(): MetricFamily[] {
    const s = this.stats;
    return [
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
}
