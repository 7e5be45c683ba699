// What the watchdog checks look at, gathered from the parts that own it.
import type { DeviceRegistry } from "../devices/registry.js";
import type { HealthSources } from "../health.js";
import type { ModbusEngine } from "../modbus/part.js";
import type { StoragePart } from "../storage/part.js";
import type { Poller } from "../telemetry/poller.js";
import type { SampleStore } from "../telemetry/sample-store.js";
import type { Uplink } from "../uplink/uplink.js";

export function healthSources(p: { storage: StoragePart; modbus: ModbusEngine; registry: DeviceRegistry; poller: Poller; uplink: Uplink; samples: SampleStore }): HealthSources {
  return {
    storage: p.storage,
    buses: () => p.modbus.buses.all(),
    devices: () => {
      const devs = p.registry.list();
      return { configured: devs.length, online: devs.filter((d) => p.poller.health(d.config.device_id)?.online).length };
    },
    readsOk: () => p.poller.stats.reads_ok,
    backlog: () => ({ outbox: p.uplink.outboxDepth(), snapshots: p.samples.stats().pending_snapshots }),
  };
}
