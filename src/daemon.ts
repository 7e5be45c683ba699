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
import { DriverPool } from "./devices/pool.js";
import { builtinProfiles } from "./profiles/registry.js";
import { DeviceRegistry, REGISTRY_MIGRATIONS } from "./devices/registry.js";
import { ConfigDevices } from "./devices/config-devices.js";
import { errorMessage } from "./errors.js";
import { ApiServer } from "./api/server.js";
import { AUTH_MIGRATIONS } from "./api/auth.js";
import type { MetricsSource } from "./api/context.js";
import { OUTBOX_MIGRATIONS, Uplink } from "./uplink/uplink.js";
import { ReleaseHealthPart } from "./update/health-marker.js";
import { HEALTH_MIGRATIONS, HealthMonitor } from "./health.js";
import { SystemdNotifier } from "./systemd/notify.js";
import { RuntimeMetrics } from "./runtime-metrics.js";
import { Maintenance } from "./maintenance.js";
import { VERSION } from "./version.js";
import { instanceId } from "./uplink/outbox.js";
import { nameKey } from "./uplink/idempotency.js";
import { DISPATCH_MIGRATIONS } from "./dispatch/store.js";
import { Dispatcher } from "./dispatch/dispatcher.js";
import { ModbusDeviceControl } from "./dispatch/device-control.js";
import { CompositeDeviceControl, LocalDeviceControl } from "./dispatch/local-control.js";
import { LocalDevices } from "./devices/local.js";
import { ZigbeeBridge } from "./zigbee/bridge.js";
import { GpioLines } from "./gpio/lines.js";
import { InputEvents } from "./dispatch/input-events.js";
import { LocalSchedules } from "./dispatch/local-schedules.js";
import { systemClock, type Clock } from "./util/clock.js";
import type { Snapshot } from "./telemetry/types.js";
import { UiPart } from "./ui/part.js";
import { FLEET_MIGRATIONS, FleetQueue } from "./fleet/queue.js";
import type { Fleet } from "./fleet/fleet.js";

/** Every module's migrations; the order here is the order they are applied in. */
export const ALL_MIGRATIONS: ModuleMigrations[] = [REGISTRY_MIGRATIONS, SAMPLE_MIGRATIONS, OUTBOX_MIGRATIONS, AUTH_MIGRATIONS, DISPATCH_MIGRATIONS, FLEET_MIGRATIONS, HEALTH_MIGRATIONS];

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
  /** Clock of the dispatch scheduler. */
  clock?: Clock;
}

export function buildDaemon(config: Config, log: Logger, opts: DaemonOptions = {}): Daemon {
  const life = new Lifecycle(log);
  const parts = new Map<string, Part>();
  const add = <T extends Part>(p: T): T => {
    parts.set(p.name, p);
    return life.add(p);
  };
  const storage = add(new StoragePart(config.data_dir, ALL_MIGRATIONS, log.child({ part: "storage" })));

  // == modbus engine (buses, transports); device drivers on its buses, by profile ==
  const modbus = add(new ModbusEngine(log.child({ part: "modbus" })));
  const profiles = builtinProfiles();
  const pool = new DriverPool(modbus.buses, profiles, config.rtu_ports);
  const connector = new ModbusConnector(pool);

  // == device registry (persisted) ==
  const registry = add(new DeviceRegistry(storage));

  // == devices on other transports, declared in the config: Zigbee (zigbee2mqtt), GPIO ==
  const local = new LocalDevices();
  if (config.zigbee) local.add(add(new ZigbeeBridge(config.zigbee, log.child({ part: "zigbee" }))));
  const gpio = config.gpio ? add(new GpioLines(config.gpio, log.child({ part: "gpio" }))) : null;
  if (gpio) local.add(gpio);

  // == sample store + uplink (outbox, data push) ==
  const samples = add(
    new SampleStore(storage, { retentionBytes: config.telemetry.retention_max_mb * 1024 * 1024, commitIntervalMs: config.telemetry.commit_interval_s * 1000, log: log.child({ part: "samples" }) }),
  );
  const uplink = add(new Uplink(config, storage, samples, log.child({ part: "uplink" })));
  // The MQTT fleet uplink's queue (optional): its own telemetry cursor holds rows in the store.
  const fleetQueue = config.fleet ? new FleetQueue(storage) : null;
  if (fleetQueue) samples.hold(() => fleetQueue.telemetryCursor());
  let fleet: Fleet | null = null;

  // == telemetry poller: each snapshot is stored, then seen by dispatch (measurement) ==
  let dispatcher: Dispatcher | null = null;
  let ui: UiPart | null = null;
  const dlog = log.child({ part: "dispatch" });
  const sink = {
    append(s: Snapshot) {
      samples.append(s);
      ui?.observe(s);
      try {
        dispatcher?.observe(s);
      } catch (e) {
        dlog.error({ err: errorMessage(e) }, "dispatch could not take a snapshot");
      }
    },
  };
  const poller = add(new Poller(registry, sink, pool, { intervalMs: config.telemetry.poll_interval_ms, log: log.child({ part: "poller" }), local }));

  // Devices listed in the config file: applied at start when changed since last applied,
  // in the background (a device that does not answer does not hold up the gateway).
  add(new ConfigDevices(config.devices, { connector, registry, rtuPorts: config.rtu_ports, log: log.child({ part: "config-devices" }) }));

  // == dispatch: the durable timeline, execution through the profiles, execution responses ==
  // The database's instance id, namespace of every derived Idempotency-Key (read once, after storage starts).
  let instanceNs = "";
  const instance = () => (instanceNs ||= instanceId(storage.db));
  dispatcher = add(
    new Dispatcher({
      db: () => storage.db,
      control: new CompositeDeviceControl(new ModbusDeviceControl(registry, poller, pool), new LocalDeviceControl(local)),
      clock: opts.clock ?? systemClock,
      log: dlog,
      pollIntervalMs: config.telemetry.poll_interval_ms,
      respond: (spec, body) => {
        const idempotencyKey = nameKey(instance(), `execution:${spec.event_id}`);
        uplink.enqueue("execution_response", config.partner.execution_url, body, { idempotencyKey });
        fleetQueue?.enqueue("events", "execution_response", body, idempotencyKey); // same transaction
      },
      onState: (spec, state, at) => {
        if (!fleetQueue) return;
        const body = { event_id: spec.event_id, source: spec.source, mode: spec.mode, event_type: spec.event_type, state, at: new Date(at).toISOString() };
        fleetQueue.enqueue("events", "event_state", body, nameKey(instance(), `event_state:${spec.event_id}:${state}:${at}`));
      },
    }),
  );
  const dispatch = dispatcher;
  add(new LocalSchedules(config.schedules, dispatch, log.child({ part: "schedules" }), () => (opts.clock ?? systemClock).now()));
  if (gpio) {
    const inputs = add(new InputEvents(dispatch, log.child({ part: "input-events" }), () => (opts.clock ?? systemClock).now()));
    gpio.onInput((input, active) => inputs.changed(input, active));
  }

  // == recurring maintenance (UTC timers): nightly checkpoint, retention sweep, certificate expiry ==
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
  health.setEventsRunning(() => dispatch.running());
  const runtime = new RuntimeMetrics();

  // == partner API (last: it answers only once everything behind it runs) ==
  const metrics: MetricsSource = {
    warnings: () => maintenance.warnings(),
    gauges() {
      const devs = [...registry.list().map((d) => ({ config: { device_id: d.config.device_id } })), ...local.list().map((d) => ({ config: { device_id: d.device_id } }))];
      const h = (id: string) => poller.health(id);
      const st = samples.stats();
      const lanes = uplink.stats();
      const buses = modbus.buses.all();
      return [
        { name: "sitegate_device_online", help: "1 when the last read of the device succeeded", type: "gauge", values: devs.map((d) => ({ labels: { device_id: d.config.device_id }, value: h(d.config.device_id)?.online ? 1 : 0 })) },
        { name: "sitegate_device_consecutive_failures", help: "failed reads in a row", type: "gauge", values: devs.map((d) => ({ labels: { device_id: d.config.device_id }, value: h(d.config.device_id)?.consecutive_failures ?? 0 })) },
        { name: "sitegate_poll_snapshots_total", help: "poll-cycle snapshots stored", type: "counter", values: [{ value: poller.stats.snapshots }] },
        { name: "sitegate_poll_late_snapshots_total", help: "snapshots of a bus that finished after its tick's deadline (stored on their own with the tick's time)", type: "counter", values: [{ value: poller.stats.late_snapshots }] },
        { name: "sitegate_poll_reads_total", help: "device reads by result", type: "counter", values: [{ labels: { result: "ok" }, value: poller.stats.reads_ok }, { labels: { result: "failed" }, value: poller.stats.reads_failed }] },
        { name: "sitegate_bus_requests_total", help: "Modbus requests sent", type: "counter", values: buses.map((b) => ({ labels: { bus: b.key }, value: b.stats.requests })) },
        { name: "sitegate_bus_timeouts_total", help: "Modbus requests without an answer", type: "counter", values: buses.map((b) => ({ labels: { bus: b.key }, value: b.stats.timeouts })) },
        { name: "sitegate_samples_pending_snapshots", help: "snapshots not yet accepted by the partner", type: "gauge", values: [{ value: st.pending_snapshots }] },
        { name: "sitegate_samples_buffer_bytes", help: "telemetry buffer size", type: "gauge", values: [{ value: st.bytes }] },
        { name: "sitegate_samples_stored_total", help: "samples committed to the telemetry buffer", type: "counter", values: [{ value: st.stored_samples_total }] },
        { name: "sitegate_samples_stored_bytes_total", help: "bytes of the packed samples committed (what the write budget is measured against)", type: "counter", values: [{ value: st.stored_bytes_total }] },
        { name: "sitegate_samples_stored_alone_bytes_total", help: "bytes the committed samples would take with every snapshot packed alone (no deltas)", type: "counter", values: [{ value: st.stored_alone_bytes_total }] },
        { name: "sitegate_samples_committed_snapshots_total", help: "snapshots committed to telemetry.db", type: "counter", values: [{ value: st.committed_snapshots_total }] },
        { name: "sitegate_samples_dropped_total", help: "unsent samples dropped because the buffer was full", type: "counter", values: [{ value: st.dropped_samples }] },
        { name: "sitegate_uplink_sent_total", help: "callbacks accepted by the partner", type: "counter", values: Object.entries(lanes).map(([lane, l]) => ({ labels: { lane }, value: l.sent })) },
        { name: "sitegate_dispatch_events", help: "dispatch events by state", type: "gauge", values: [{ labels: { state: "running" }, value: dispatch.running() }, { labels: { state: "scheduled" }, value: dispatch.scheduled() }] },
        { name: "sitegate_dispatch_writes_total", help: "dispatch register writes by result", type: "counter", values: [{ labels: { result: "ok" }, value: dispatch.stats.writes_ok }, { labels: { result: "failed" }, value: dispatch.stats.writes_failed }] },
        { name: "sitegate_dispatch_confirm_reads_total", help: "power reads in the control lane right after a setpoint write, by result", type: "counter", values: [{ labels: { result: "ok" }, value: dispatch.stats.confirms_ok }, { labels: { result: "failed" }, value: dispatch.stats.confirms_failed }] },
        { name: "sitegate_dispatch_receipt_commits_total", help: "transactions that committed /dr receipts (group commit: several requests each)", type: "counter", values: [{ labels: { kind: "commits" }, value: dispatch.stats.receipt_commits }, { labels: { kind: "requests" }, value: dispatch.stats.receipt_requests }] },
        { name: "sitegate_dispatch_clock_steps_total", help: "wall clock steps the scheduler noticed", type: "counter", values: [{ value: dispatch.stats.clock_steps }] },
        { name: "sitegate_uplink_failures_total", help: "callback attempts not accepted", type: "counter", values: Object.entries(lanes).map(([lane, l]) => ({ labels: { lane }, value: l.failures })) },
        { name: "sitegate_uplink_dead_letters", help: "callbacks the partner kept rejecting, kept for `sitegate outbox retry`", type: "gauge", values: [{ value: uplink.deadLetterCount() }] },
        { name: "sitegate_uplink_lane_held", help: "1 while a lane is held because the partner rejects our credentials", type: "gauge", values: Object.entries(lanes).map(([lane, l]) => ({ labels: { lane }, value: l.held ? 1 : 0 })) },
        { name: "sitegate_uplink_oldest_age_seconds", help: "age of the oldest message not yet accepted by the partner (0 when none)", type: "gauge", values: uplink.oldestAges().map(({ lane, age_s }) => ({ labels: { lane }, value: age_s })) },
        { name: "sitegate_watchdog_pings_total", help: "health ticks whose checks passed (WATCHDOG=1 under systemd)", type: "counter", values: [{ value: health.stats.pings }] },
        { name: "sitegate_watchdog_withheld_total", help: "health ticks whose checks failed (ping withheld)", type: "counter", values: [{ value: health.stats.withheld }] },
        ...runtime.families(buses),
        ...(fleet?.gauges() ?? []),
      ];
    },
  };
  // == local status page: on the API listener, or its own after the API ==
  const uiPart = new UiPart({ config, log: log.child({ part: "ui" }), registry, local, poller, buses: modbus.buses, profiles, dispatch, uplink, samples, db: () => storage.db });
  ui = uiPart;
  add(new ApiServer({ config, storage, registry, connector, health: poller, local, profiles, metrics, uplink, dispatch, log: log.child({ part: "api" }), now: opts.now, plugins: () => uiPart.apiPlugins() }));
  add(uiPart);

  // == release health gate (after every part started): the marker `sitegate update check` keeps a new release by ==
  // The probe is the health monitor's: READY sent, a database commit, a first poll where devices exist.
  add(new ReleaseHealthPart(config.data_dir, VERSION, { healthy: () => health.isHealthy }, log.child({ part: "release-health" })));

  // == fleet uplink over MQTT (optional; after the API, like it: commands need everything behind) ==
  if (config.fleet && fleetQueue) {
    const flog = log.child({ part: "fleet" });
    const fleetConfig = config.fleet;
    const queue = fleetQueue;
    // MQTT.js costs about 15 MiB of resident memory: loaded only when a fleet is configured.
    add({
      name: "fleet",
      async start() {
        const { Fleet } = await import("./fleet/fleet.js");
        fleet = new Fleet({ config, fleet: fleetConfig, queue, samples, registry, health: poller, local, dispatch, connector, profiles, instance, log: flog });
        fleet.start();
      },
      async stop() {
        await fleet?.stop();
      },
      /** The running Fleet (null before start). */
      get current() {
        return fleet;
      },
    });
  }

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
