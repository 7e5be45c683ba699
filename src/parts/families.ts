// The transport families of the site, one factory entry each: a new transport is its
// folder (its Device class and its family) plus one line here. Each entry builds its
// family from the generic context (the config, the lifecycle, the site's events, the
// database, the profiles, the parts added before), or nothing when the config has none
// of its devices; the registry (devices/directory.ts) lists them all as one.
import type { Config } from "../config/schema.js";
import type { DeviceFamily } from "../devices/family.js";
import type { Part } from "../lifecycle.js";
import type { Logger } from "../log.js";
import { GpioLines } from "../gpio/lines.js";
import { modbusFamily } from "../modbus/device/setup.js";
import type { ProfileRegistry } from "../profiles/registry.js";
import type { StoragePart } from "../storage/part.js";
import { ZigbeeBridge } from "../zigbee/bridge.js";
import type { SiteEvents } from "./site-events.js";

/** What a family's factory may use. */
export interface FamilyContext {
  config: Config;
  log(part: string): Logger;
  /** Adds a part to the lifecycle (a family with a connection of its own starts and stops with the daemon). */
  add<T extends Part>(part: T): T;
  emit<K extends keyof SiteEvents>(name: K): (...args: SiteEvents[K]) => void;
  /** The database part (a family that persists its devices keeps them there). */
  storage: StoragePart;
  /** The site's device profiles. */
  profiles: ProfileRegistry;
  /** A part the composition root added before the families, by name (the Modbus bus engine is "modbus"). */
  part<T extends Part>(name: string): T;
}

export type FamilyFactory = (ctx: FamilyContext) => DeviceFamily | null;

export const FAMILIES: readonly FamilyFactory[] = [
  modbusFamily,
  (c) => (c.config.zigbee ? c.add(new ZigbeeBridge(c.config.zigbee, c.log("zigbee"))) : null),
  (c) => (c.config.gpio ? c.add(new GpioLines(c.config.gpio, c.log("gpio"), c.emit("input"))) : null),
];

/** Every family the factories build for this site, in factory order. */
export function buildFamilies(ctx: FamilyContext, factories: readonly FamilyFactory[] = FAMILIES): DeviceFamily[] {
  return factories.flatMap((make) => make(ctx) ?? []);
}
