// Composition root: builds every part from the config and owns their start/stop order.
// Parts are started in the order they are added and stopped in reverse. Constructors
// take the StoragePart (not the db) and reach `storage.db` only in start().
import type { Config } from "./config/schema.js";
import { Lifecycle, type Part } from "./lifecycle.js";
import type { Logger } from "./log.js";
import type { ModuleMigrations } from "./storage/db.js";
import { StoragePart } from "./storage/part.js";
import { SAMPLE_MIGRATIONS, SampleStore } from "./telemetry/sample-store.js";
import { Poller } from "./telemetry/poller.js";
import { ModbusEngine } from "./modbus/part.js";
import { ModbusConnector } from "./devices/connector.js";
import { DeviceRegistry, REGISTRY_MIGRATIONS } from "./devices/registry.js";
import { configureDevices } from "./devices/configure.js";
import { errorMessage } from "./errors.js";
import { ApiServer } from "./api/server.js";
import { AUTH_MIGRATIONS } from "./api/auth.js";
import type { MetricsSource } from "./api/ops.js";
import { OUTBOX_MIGRATIONS, Uplink } from "./uplink/uplink.js";
import { HEALTH_MIGRATIONS, HealthMonitor } from "./health.js";
import { SystemdNotifier } from "./systemd/notify.js";
import { RuntimeMetrics } from "./runtime-metrics.js";
import { Maintenance } from "./maintenance.js";

/** Every module's migrations; the order here is the order they are applied in. */
export const ALL_MIGRATIONS: ModuleMigrations[] = [REGISTRY_MIGRATIONS, SAMPLE_MIGRATIONS, OUTBOX_MIGRATIONS, AUTH_MIGRATIONS, HEALTH_MIGRATIONS];

export interface Daemon {
  readonly config: Config;
  readonly storage: StoragePart;
  /** Every part by name, for tests and the health endpoint. */
  readonly parts: ReadonlyMap<string, Part>;
  part<T extends Part>(name: string): T;
  /** Watchdog checks, systemd notifications, and onHealthy() for the updater. */
  readonly health: HealthMonitor;
  start(): Promise<void>;
  stop(): Promise<void>;
}

export interface DaemonOptions {
  /** Clock for token expiry (tests move it forward). */
  now?: () => number;
  /** How many dispatch events run now, for STATUS= (also settable later: health.setEventsRunning). */
  eventsRunning?: () => number;
}

export function buildDaemon(config: Config, log: Logger, opts: DaemonOptions = {}): Daemon {
  const life = new Lifecycle(log);
  const parts = new Map<string, Part>();
  const add = <T extends Part>(p: T): T => {
    parts.set(p.name, p);
    return life.add(p);
  };
  const storage = add(new StoragePart(config.data_dir, ALL_MIGRATIONS, log.child({ part: "storage" })));

  // == modbus engine (buses, transports) ==
  const modbus = add(new ModbusEngine(config, log.child({ part: "modbus" })));
  const connector = new ModbusConnector(modbus.pool);

  // == device registry (persisted; applies config.devices at start) ==
  const registry = add(new DeviceRegistry(storage));

  // == sample store + uplink (outbox, data push) ==
  const samples = add(
    new SampleStore(storage, { retentionBytes: config.telemetry.retention_max_mb * 1024 * 1024, log: log.child({ part: "samples" }) }),
  );
  const uplink = add(new Uplink(config, storage, samples, log.child({ part: "uplink" })));

  // == telemetry poller ==
  const poller = add(new Poller(registry, samples, modbus.pool, { intervalMs: config.telemetry.poll_interval_ms, log: log.child({ part: "poller" }) }));

  // Devices listed in the config file are configured at start, like a configure request,
  // in the background: a device that does not answer does not hold up the gateway.
  let applying: Promise<unknown> = Promise.resolve();
  add({
    name: "config-devices",
    start() {
      if (config.devices.length === 0) return;
      const dlog = log.child({ part: "config-devices" });
      applying = configureDevices(config.devices, { connector, registry, rtuPorts: config.rtu_ports, log: dlog }).then(
        (results) => {
          for (const r of results) {
            if (r.status === "accepted") dlog.info({ device_id: r.device_id }, r.message);
            else dlog.warn({ device_id: r.device_id, code: r.code }, r.message);
          }
        },
        (e) => dlog.error({ err: errorMessage(e) }, "cannot apply the devices of the config file"),
      );
    },
    async stop() {
      await applying;
    },
  });

  // == recurring maintenance (node-cron): nightly checkpoint, retention sweep, certificate expiry ==
  const maintenance = add(new Maintenance(config, storage, samples, log.child({ part: "maintenance" })));

  // == health: watchdog checks and systemd notifications; READY=1 once every part started ==
  const health = new HealthMonitor(
    {
      storage,
      buses: () => modbus.buses.all(),
      devices: () => {
        const devs = registry.list();
        return { configured: devs.length, online: devs.filter((d) => poller.health(d.config.device_id)?.online).length };
      },
      readsOk: () => poller.stats.reads_ok,
      backlog: () => ({ outbox: uplink.outboxDepth(), snapshots: samples.stats().pending_snapshots }),
    },
    new SystemdNotifier(log.child({ part: "systemd" })),
    log.child({ part: "health" }),
  );
  if (opts.eventsRunning) health.setEventsRunning(opts.eventsRunning);
  const runtime = new RuntimeMetrics();

  // == partner API (last: it answers only once everything behind it runs) ==
  const metrics: MetricsSource = {
    warnings: () => maintenance.warnings(),
    gauges() {
      const devs = registry.list();
      const h = (id: string) => poller.health(id);
      const st = samples.stats();
      const lanes = uplink.stats();
      const buses = modbus.buses.all();
      return [
        { name: "sitegate_device_online", help: "1 when the last read of the device succeeded", type: "gauge", values: devs.map((d) => ({ labels: { device_id: d.config.device_id }, value: h(d.config.device_id)?.online ? 1 : 0 })) },
        { name: "sitegate_device_consecutive_failures", help: "failed reads in a row", type: "gauge", values: devs.map((d) => ({ labels: { device_id: d.config.device_id }, value: h(d.config.device_id)?.consecutive_failures ?? 0 })) },
        { name: "sitegate_poll_snapshots_total", help: "poll-cycle snapshots stored", type: "counter", values: [{ value: poller.stats.snapshots }] },
        { name: "sitegate_poll_reads_total", help: "device reads by result", type: "counter", values: [{ labels: { result: "ok" }, value: poller.stats.reads_ok }, { labels: { result: "failed" }, value: poller.stats.reads_failed }] },
        { name: "sitegate_bus_requests_total", help: "Modbus requests sent", type: "counter", values: buses.map((b) => ({ labels: { bus: b.key }, value: b.stats.requests })) },
        { name: "sitegate_bus_timeouts_total", help: "Modbus requests without an answer", type: "counter", values: buses.map((b) => ({ labels: { bus: b.key }, value: b.stats.timeouts })) },
        { name: "sitegate_bus_queued", help: "requests waiting for the bus", type: "gauge", values: buses.map((b) => ({ labels: { bus: b.key }, value: b.queued })) },
        { name: "sitegate_samples_pending_snapshots", help: "snapshots not yet accepted by the partner", type: "gauge", values: [{ value: st.pending_snapshots }] },
        { name: "sitegate_samples_buffer_bytes", help: "telemetry buffer size", type: "gauge", values: [{ value: st.bytes }] },
        { name: "sitegate_samples_dropped_total", help: "unsent samples dropped because the buffer was full", type: "counter", values: [{ value: st.dropped_samples }] },
        { name: "sitegate_uplink_sent_total", help: "callbacks accepted by the partner", type: "counter", values: Object.entries(lanes).map(([lane, l]) => ({ labels: { lane }, value: l.sent })) },
        { name: "sitegate_uplink_failures_total", help: "callback attempts not accepted", type: "counter", values: Object.entries(lanes).map(([lane, l]) => ({ labels: { lane }, value: l.failures })) },
        { name: "sitegate_uplink_oldest_age_seconds", help: "age of the oldest message not yet accepted by the partner (0 when none)", type: "gauge", values: uplink.oldestAges().map(({ lane, age_s }) => ({ labels: { lane }, value: age_s })) },
        { name: "sitegate_watchdog_pings_total", help: "health ticks whose checks passed (WATCHDOG=1 under systemd)", type: "counter", values: [{ value: health.stats.pings }] },
        { name: "sitegate_watchdog_withheld_total", help: "health ticks whose checks failed (ping withheld)", type: "counter", values: [{ value: health.stats.withheld }] },
        ...runtime.families(buses),
      ];
    },
  };
  add(new ApiServer({ config, storage, registry, connector, health: poller, profiles: modbus.profiles, metrics, log: log.child({ part: "api" }), now: opts.now }));

  return {
    config,
    storage,
    parts,
    part<T extends Part>(name: string): T {
      const p = parts.get(name);
      if (!p) throw new Error(`no part named ${name}`);
      return p as T;
    },
    health,
    async start() {
      runtime.start();
      try {
        await life.start();
      } catch (e) {
        runtime.stop();
        throw e;
      }
      health.start();
    },
    async stop() {
      await health.stop();
      await life.stop();
      runtime.stop();
    },
  };
}
