// What each of the later parts is given, taken from the core parts the composition root
// built before them: the health monitor's sources, and the deps of the three front ends
// (the partner API, the status page, the fleet uplink).
import type { ApiDeps } from "../api/context.js";
import type { Config, FleetConfig } from "../config/schema.js";
import type { DeviceConnector } from "../devices/types.js";
import { ModbusCommissioning } from "../modbus/device/commission.js";
import type { SiteDevices } from "../devices/directory.js";
import type { Dispatcher } from "../dispatch/dispatcher.js";
import type { FleetDeps } from "../fleet/fleet.js";
import { NonceStore } from "../fleet/nonces.js";
import { telemetryConsumer } from "../fleet/telemetry-cursor.js";
import type { DeliveryLog } from "../delivery/log.js";
import { HealthMonitor } from "../health.js";
import type { Logger } from "../log.js";
import type { ModbusEngine } from "../modbus/part.js";
import type { ProfileRegistry } from "../profiles/registry.js";
import type { StoragePart } from "../storage/part.js";
import { SystemdNotifier } from "../systemd/notify.js";
import type { SiteClock } from "../telemetry/site-clock.js";
import type { SampleStore } from "../telemetry/sample-store.js";
import type { UiPart } from "../ui/part.js";
import type { Uplink } from "../uplink/uplink.js";

export interface Core {
  config: Config;
  storage: StoragePart;
  profiles: ProfileRegistry;
  connector: DeviceConnector;
  /** The one registry of every device, whatever its family. */
  devices: SiteDevices;
  modbus: ModbusEngine;
  /** The site clock (its part is named "poller"). */
  poller: SiteClock;
  samples: SampleStore;
  deliveryLog: DeliveryLog;
  uplink: Uplink;
  dispatch: Dispatcher;
}

export function sampleStoreOptions(
  tm: Config["telemetry"],
  log: Logger,
  appended: () => void,
): ConstructorParameters<typeof SampleStore>[1] {
  return { retentionBytes: tm.retention_max_mb * 1024 * 1024, commitIntervalMs: tm.commit_interval_s * 1000, log, appended };
}

/** The watchdog checks and systemd notifications, looking at the core parts. */
export function healthMonitor(c: Core, log: (part: string) => Logger): HealthMonitor {
  const sources = {
    storage: c.storage,
    buses: () => c.modbus.buses.all(),
    // Every family's devices, and every family's readings.
    devices: () => {
      const devs = c.devices.list();
      return { configured: devs.length, online: devs.filter((d) => d.health().online).length };
    },
    readsOk: () => c.poller.stats.readings,
    backlog: () => ({ outbox: c.uplink.pendingMessages(), snapshots: c.samples.stats().pending_snapshots }),
  };
  const monitor = new HealthMonitor(sources, new SystemdNotifier(log("systemd")), log("health"));
  monitor.setEventsRunning(() => c.dispatch.running());
  return monitor;
}

export function statusPageDeps(
  c: Core,
  more: Pick<ConstructorParameters<typeof UiPart>[0], "log" | "guesses" | "connectionLimits">,
): ConstructorParameters<typeof UiPart>[0] {
  const { config, devices, profiles, dispatch, uplink, samples } = c;
  const scope = { rtuPaths: Object.values(config.rtu_ports).map((p) => p.path), allow: config.commissioning.allow };
  const commissioning = new ModbusCommissioning(c.modbus.buses, profiles, more.log, scope);
  return { config, devices, buses: c.modbus.buses, commissioning, profiles, dispatch, uplink, samples, db: () => c.storage.db, ...more };
}

export function apiDeps(c: Core, more: Pick<ApiDeps, "metrics" | "log" | "now" | "plugins" | "guesses" | "connectionLimits">): ApiDeps {
  const { config, storage, devices, connector, profiles, uplink, dispatch } = c;
  return { config, storage, devices, connector, profiles, uplink, dispatch, ...more };
}

/** What the fleet owns besides what it shares: its config, its nonces and its cursor on the sample store. */
export type FleetOwn = Pick<FleetDeps, "fleet" | "nonces" | "telemetry" | "clock">;

export function fleetOwn(fleet: FleetConfig, storage: StoragePart, samples: SampleStore, clock: FleetDeps["clock"]): FleetOwn {
  return { fleet, nonces: new NonceStore(storage), telemetry: telemetryConsumer(samples, storage), clock };
}

export function fleetDeps(c: Core, own: FleetOwn, instance: () => string, log: Logger): FleetDeps {
  const { config, devices, dispatch, connector } = c;
  return {
    config,
    ...own,
    deliveryLog: c.deliveryLog,
    devices,
    dispatch,
    connector,
    instance,
    log,
  };
}
