// The transport families of the site, one factory entry each: a new transport is its
// folder (its Device class and its family) plus one line here. Each entry builds its
// family from the config and the parts it needs, or nothing when the config has none of
// its devices; the registry (devices/directory.ts) lists them all as one.
import type { Config } from "../config/schema.js";
import type { DeviceFamily } from "../devices/family.js";
import type { DeviceSource } from "../devices/types.js";
import type { Part } from "../lifecycle.js";
import type { Logger } from "../log.js";
import { GpioLines } from "../gpio/lines.js";
import { ModbusFamily } from "../modbus/device/family.js";
import type { DriverPool } from "../modbus/device/pool.js";
import { ModbusPolling } from "../modbus/device/polling.js";
import { ZigbeeBridge } from "../zigbee/bridge.js";
import type { SiteEvents } from "./site-events.js";

/** What a family's factory may use. */
export interface FamilyContext {
  config: Config;
  log(part: string): Logger;
  /** Adds a part to the lifecycle (a family with a connection of its own starts and stops with the daemon). */
  add<T extends Part>(part: T): T;
  emit<K extends keyof SiteEvents>(name: K): (...args: SiteEvents[K]) => void;
  /** The Modbus side: the persisted registry and the driver pool. */
  modbus: { registry: DeviceSource & { readonly version: number }; pool: Pick<DriverPool, "driverFor"> };
}

export type FamilyFactory = (ctx: FamilyContext) => DeviceFamily | null;

export const FAMILIES: readonly FamilyFactory[] = [
  (c) => new ModbusFamily(c.modbus.registry, c.modbus.pool, c.add(new ModbusPolling(c.modbus.registry, c.modbus.pool, modbusPolling(c)))),
  (c) => (c.config.zigbee ? c.add(new ZigbeeBridge(c.config.zigbee, c.log("zigbee"))) : null),
  (c) => (c.config.gpio ? c.add(new GpioLines(c.config.gpio, c.log("gpio"), c.emit("input"))) : null),
];

/** Every family the factories build for this site, in factory order. */
export function buildFamilies(ctx: FamilyContext, factories: readonly FamilyFactory[] = FAMILIES): DeviceFamily[] {
  return factories.flatMap((make) => make(ctx) ?? []);
}

function modbusPolling(c: FamilyContext): ConstructorParameters<typeof ModbusPolling>[2] {
  return { intervalMs: c.config.telemetry.poll_interval_ms, log: c.log("poller") };
}
