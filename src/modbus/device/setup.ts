// The Modbus family as the composition root builds it from its factory entry
// (parts/families.ts): the persisted registry, the driver pool over the bus engine,
// pairing (the configure request's connector), the config file's device entries applied
// in the background, and the polling the site clock drives. What it needs of the
// composition root is the generic family context, stated here as it uses it.
import { ConfigDevices } from "./config-devices.js";
import { DeviceRegistry } from "./registry.js";
import type { DeviceConnector } from "../../devices/types.js";
import type { Part } from "../../lifecycle.js";
import type { Logger } from "../../log.js";
import type { ProfileRegistry } from "../../profiles/registry.js";
import type { StoragePart } from "../../storage/part.js";
import type { ModbusEngine } from "../part.js";
import { deviceConfigSchema, type DeviceConfig, type RtuPortConfig } from "../config-schema.js";
import { validateDevices } from "../config-rules.js";
import { ModbusFamily } from "./family.js";
import { Pairing } from "./pairing.js";
import { ModbusPolling } from "./polling.js";
import { DriverPool } from "./pool.js";
import { captureHeld, type Capture } from "./capture.js";

/** The family context's members the Modbus family uses. */
export interface ModbusFamilyContext {
  /** The config file's members the family reads: its own blocks (config/schema.ts composes them), the site's organization, the poll interval. */
  config: {
    organization_id: string;
    devices: DeviceConfig[];
    rtu_ports: Record<string, RtuPortConfig>;
    telemetry: { poll_interval_ms: number };
  };
  log(part: string): Logger;
  add<T extends Part>(part: T): T;
  emit(name: "devices_changed"): () => void;
  storage: StoragePart;
  profiles: ProfileRegistry;
  part<T extends Part>(name: string): T;
}

/** The Modbus family, its parts added to the lifecycle; `connector` pairs the partner's configure entries. */
export function modbusFamily(
  c: ModbusFamilyContext,
): ModbusFamily & { connector: DeviceConnector<DeviceConfig>; capture(deviceId: string): Promise<Capture> } {
  const pool = new DriverPool(c.part<ModbusEngine>("modbus").buses, c.profiles, c.config.rtu_ports);
  const registry = c.add(new DeviceRegistry(c.storage, c.emit("devices_changed")));
  const pairing = new Pairing({ pool, registry, log: c.log("pairing") });
  const rules = { organizationId: c.config.organization_id, rtuPorts: c.config.rtu_ports, profiles: c.profiles };
  const connector: DeviceConnector<DeviceConfig> = {
    family: "modbus",
    entrySchema: deviceConfigSchema,
    check: (entries) => validateDevices(entries, rules),
    configure: (entries) => pairing.configure(entries),
  };
  c.add(new ConfigDevices(c.config.devices, { connector: pairing, registry, log: c.log("config-devices") }));
  const polling = c.add(new ModbusPolling(registry, pool, { intervalMs: c.config.telemetry.poll_interval_ms, log: c.log("poller") }));
  const capture = (deviceId: string) => captureHeld(registry, pool, deviceId);
  return Object.assign(new ModbusFamily(registry, pool, polling), { connector, capture });
}
