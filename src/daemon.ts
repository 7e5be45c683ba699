// Composition root: every part of the daemon, in start order (stopped in reverse), and
// the events they exchange. Constructors take the StoragePart (not the db) and reach
// `storage.db` only in start(). Which parts are essential, and what happens when another
// fails to start: src/lifecycle.ts.
import type { Config } from "./config/schema.js";
import { EventBus } from "./event-bus.js";
import { Lifecycle, type HealthWarning, type Part, type PartOptions } from "./lifecycle.js";
import type { Logger } from "./log.js";
import type { ModuleMigrations } from "./storage/db.js";
import { StoragePart } from "./storage/part.js";
import { SAMPLE_MIGRATIONS, SampleStore } from "./telemetry/sample-store.js";
import { SiteClock } from "./telemetry/site-clock.js";
import { ModbusEngine } from "./modbus/part.js";
import { siteProfiles } from "./profiles/registry.js";
import { REGISTRY_MIGRATIONS } from "./modbus/device/registry.js";
import { ApiServer } from "./api/server.js";
import { GuessLimits } from "./api/guess-limit.js";
import type { ConnectionLimits } from "./api/connection-limits.js";
import { AUTH_MIGRATIONS } from "./api/auth.js";
import { UPLINK_MIGRATIONS, Uplink } from "./uplink/uplink.js";
import { partnerRoutes } from "./uplink/callbacks.js";
import { ReleaseHealthPart } from "./update/health-marker.js";
import { HEALTH_MIGRATIONS, type HealthMonitor } from "./health.js";
import { RuntimeMetrics } from "./runtime-metrics.js";
import { Maintenance } from "./maintenance.js";
import { VERSION } from "./version.js";
import { DISPATCH_MIGRATIONS } from "./dispatch/store.js";
import { Dispatcher } from "./dispatch/dispatcher.js";
import { SiteDevices } from "./devices/directory.js";
import type { DeviceDirectory } from "./model/device.js";
import { InputEvents } from "./dispatch/input-events.js";
import { LocalSchedules } from "./dispatch/local-schedules.js";
import { systemClock, type Clock } from "./util/clock.js";
import { UiPart } from "./ui/part.js";
import { FLEET_MIGRATIONS } from "./fleet/migrations.js";
import { DELIVERY_MIGRATIONS, DeliveryLog } from "./delivery/log.js";
import { FleetPart } from "./fleet/part.js";
import { fleetRoutes } from "./fleet/mqtt-sink.js";
import type { SiteEvents } from "./parts/site-events.js";
import { DispatchDelivery } from "./parts/dispatch-delivery.js";
import { apiDeps, fleetDeps, fleetOwn, healthMonitor, sampleStoreOptions, statusPageDeps, type Core } from "./parts/deps.js";
import { buildFamilies, type FamilyFactory } from "./parts/families.js";
import { SitegateError } from "./errors.js";
import { ControlSocket, capturing } from "./control-socket.js";
import { unfinishedConfig, unfinishedWarning } from "./config/unfinished.js";

/** Every module's migrations; the order here is the order they are applied in. */
export const ALL_MIGRATIONS: ModuleMigrations[] = [
  REGISTRY_MIGRATIONS,
  SAMPLE_MIGRATIONS,
  DELIVERY_MIGRATIONS,
  UPLINK_MIGRATIONS,
  AUTH_MIGRATIONS,
  DISPATCH_MIGRATIONS,
  FLEET_MIGRATIONS,
  HEALTH_MIGRATIONS,
];

export interface Daemon {
  readonly config: Config;
  readonly storage: StoragePart;
  /** Every part by name, for tests and the health endpoint. */
  readonly parts: ReadonlyMap<string, Part>;
  part<T extends Part>(name: string): T;
  /** The bus the parts exchange events on. */
  readonly events: EventBus<SiteEvents>;
  /** The one registry of every device, whatever its family. */
  readonly devices: DeviceDirectory;
  /** Watchdog checks, systemd notifications, and onHealthy() for the updater. */
  readonly health: HealthMonitor;
  start(): Promise<void>;
  stop(): Promise<void>;
  /** The lifecycle's warnings (a part not running after a failed start, and the parts' own), and an unfinished config's. */
  warnings(): HealthWarning[];
}

export interface DaemonOptions {
  /** Clock for token expiry (tests move it forward). */
  now?: () => number;
  /** Clock of the dispatch scheduler. */
  clock?: Clock;
  /** Shorter HTTP timeouts or lower connection counts for tests (both listeners). */
  connectionLimits?: Partial<ConnectionLimits>;
  /** The transport families, one factory each (default: parts/families.ts; a test registers one of its own beside them). */
  families?: readonly FamilyFactory[];
}

const ESSENTIAL: PartOptions = { essential: true };

export function buildDaemon(config: Config, log: Logger, opts: DaemonOptions = {}): Daemon {
  const life = new Lifecycle(log);
  const add = <T extends Part>(p: T, o?: PartOptions): T => life.add(p, o);
  const logOf = (part: string) => log.child({ part });
  const events = new EventBus<SiteEvents>(logOf("events"));
  const clock = opts.clock ?? systemClock;
  const now = () => clock.now();
  const tm = config.telemetry;
  add(new RuntimeMetrics());
  const storage = add(new StoragePart(config.data_dir, ALL_MIGRATIONS, logOf("storage")), ESSENTIAL);
  const modbus = add(new ModbusEngine(logOf("modbus")));
  const profiles = siteProfiles(config.profiles_dir);
  // A broken site profile is left out: the gateway runs the devices it can.
  for (const e of profiles.errors) log.error({ file: e.path, err: e.message }, "site profile left out: it does not load");
  // The one registry: every family's devices; an id two families hold (stored before the rule) is the first's.
  const devices = new SiteDevices([], (device_id, families) =>
    log.error({ device_id, families }, "device_id names devices of two families: the second is left out; give it another device_id"),
  );
  const part = <T extends Part>(name: string): T => {
    const p = life.parts.get(name);
    if (!p) throw new SitegateError("INTERNAL", `no part named ${name}`);
    return p as T;
  };
  const familyCtx = { config, log: logOf, add, emit: events.emitter.bind(events), storage, profiles, part };
  const families = buildFamilies(familyCtx, opts.families);
  for (const f of families) devices.add(f);
  // `sitegate dump --config` through the daemon's own buses: a Unix socket in data_dir, this user only.
  const capture = families.find(capturing);
  if (capture) add(new ControlSocket(config.data_dir, { dump: (id) => capture.capture(id) }, logOf("control-socket")));
  // The partner's configure entries go to the family that pairs them (the Modbus family).
  const connector = devices.connector();
  const samples = add(new SampleStore(storage, sampleStoreOptions(tm, logOf("samples"), events.emitter("samples_appended"))));
  const deliveryLog = new DeliveryLog(storage, events.emitter("messages_appended")); // every outbound message; https and mqtt consume it
  const uplink = add(new Uplink(config, storage, samples, logOf("uplink"), undefined, { deliveryLog }));
  const fleetStreams = config.fleet ? fleetOwn(config.fleet, storage, samples, clock) : null;
  const sink = { append: events.emitter("snapshot") };
  // The site clock: every family's readings at each tick, one snapshot per tick.
  const poller = add(new SiteClock(devices, sink, { intervalMs: tm.poll_interval_ms, log: logOf("poller"), siteId: config.site_id }));
  const delivery = new DispatchDelivery(storage, deliveryLog, [
    partnerRoutes(config.partner.execution_url),
    ...(fleetStreams ? [fleetRoutes] : []),
  ]);
  const dispatchDeps = { db: () => storage.db, devices, clock, log: logOf("dispatch"), pollIntervalMs: tm.poll_interval_ms };
  const dispatch = add(new Dispatcher({ ...dispatchDeps, respond: delivery.respond, onState: delivery.onState }));
  add(new LocalSchedules(config.schedules, dispatch, logOf("schedules"), clock));
  const inputs = config.gpio ? add(new InputEvents(dispatch, logOf("input-events"), now)) : null;
  add(new Maintenance(config, storage, samples, logOf("maintenance")));
  const core = { config, storage, profiles, connector, devices, modbus, poller, samples, deliveryLog, uplink, dispatch };
  const health = healthMonitor(core, logOf);
  // /healthz, the fleet's status: the parts' warnings, and "degraded: unfinished config" while init's placeholders are left
  const unfinished = unfinishedWarning(unfinishedConfig(config));
  const warnings = () => [...unfinished, ...life.warnings()];
  const metrics = { gauges: () => [...life.metrics(), ...events.metrics()], warnings };
  const http = { guesses: new GuessLimits(opts.now), connectionLimits: opts.connectionLimits }; // a lock per username for each front end
  const ui = new UiPart(statusPageDeps(core, { log: logOf("ui"), ...http }));
  add(new ApiServer(apiDeps(core, { metrics, log: logOf("api"), now: opts.now, plugins: () => ui.apiPlugins(), ...http })), ESSENTIAL);
  add(ui);
  // The marker `sitegate update check` keeps a new release by: the health monitor's probe.
  add(new ReleaseHealthPart(config.data_dir, VERSION, { healthy: () => health.isHealthy }, logOf("release-health")));
  const fleet = fleetStreams && add(new FleetPart({ ...fleetDeps(core, fleetStreams, delivery.instance, logOf("fleet")), warnings }));
  add(health); // last: READY=1 once every part has started (or is being retried)
  listen(events, { samples, ui, dispatch, uplink, inputs, fleet });
  return daemon(config, storage, life, events, health, devices, warnings);
}

/** Who listens to which event, each listener under its own part's name (in the order they hear it). */
function listen(
  events: EventBus<SiteEvents>,
  p: Pick<Core, "samples" | "dispatch" | "uplink"> & { ui: UiPart; inputs: InputEvents | null; fleet: FleetPart | null },
): void {
  const { samples, ui, dispatch, uplink, inputs, fleet } = p;
  events.on("snapshot", samples.name, (s) => samples.append(s));
  events.on("snapshot", ui.name, (s) => ui.observe(s));
  events.on("snapshot", dispatch.name, (s) => dispatch.observe(s));
  events.on("samples_appended", uplink.name, () => uplink.samplesAppended());
  events.on("messages_appended", uplink.name, (routes) => uplink.messagesAppended(routes));
  if (inputs) events.on("input", inputs.name, (input, active) => inputs.changed(input, active));
  if (!fleet) return;
  events.on("samples_appended", fleet.name, () => fleet.samplesAppended());
  events.on("messages_appended", fleet.name, (routes) => fleet.messagesAppended(routes));
  events.on("devices_changed", fleet.name, () => fleet.devicesChanged());
}

function daemon(
  config: Config,
  storage: StoragePart,
  life: Lifecycle,
  events: EventBus<SiteEvents>,
  health: HealthMonitor,
  devices: DeviceDirectory,
  warnings: () => HealthWarning[],
): Daemon {
  const part = <T extends Part>(name: string): T => {
    const p = life.parts.get(name);
    if (!p) throw new SitegateError("INTERNAL", `no part named ${name}`);
    return p as T;
  };
  return {
    config,
    storage,
    parts: life.parts,
    part,
    events,
    devices,
    health,
    start: () => life.start(),
    stop: () => life.stop(),
    warnings,
  };
}
