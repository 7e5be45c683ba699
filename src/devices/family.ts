// A transport family: the devices one transport reaches (Modbus through profiles, Zigbee
// through zigbee2mqtt, GPIO lines, a test's own). The registry (directory.ts) lists every
// family's devices as one; the composition root builds each family from one entry of its
// factory list (parts/families.ts), so a new transport is a folder plus that entry. The
// site clock (telemetry/site-clock.ts) asks every family for its readings at each tick,
// through the registry: a family either reads its devices on the tick (`read`) or reports
// on its own, and then the tick takes its devices' latest values.
import type { Device, Metrics } from "../model/device.js";
import type { DeviceConnector } from "./types.js";

/** One device's values of one tick. */
export interface Reading {
  device_id: string;
  metrics: Metrics;
}

/**
 * A family's share of one tick: parts ready at once or later (the Modbus family: one per
 * bus). A part that arrives after the tick's deadline (the next tick) is stored on its
 * own with its tick's time; `source` names it in the logs.
 */
export type TickReadings = ReadonlyArray<{ source: string; readings: readonly Reading[] | Promise<readonly Reading[]> }>;

export interface DeviceFamily {
  /** "modbus", "zigbee", "gpio", ... */
  readonly family: string;
  devices(): readonly Device[];
  /** Goes up by one with every change of its device list or a descriptor (absent: the list never changes). */
  readonly version?: number;
  /** Pairs and stores the partner's configure entries (the Modbus family's pairing); absent: its devices come from the config file. */
  readonly connector?: DeviceConnector;
  /** Reads its devices for the tick at `ts` (UTC ms); absent: the family reports on its own (latestReadings). */
  read?(ts: number): TickReadings;
}

/** The latest values of every online device that has any: the tick's share of a family that reports on its own. */
export function latestReadings(devices: readonly Device[]): Reading[] {
  const out: Reading[] = [];
  for (const d of devices) {
    const m = d.latest();
    if (d.health().online && Object.keys(m).length > 0) out.push({ device_id: d.id, metrics: { ...m } });
  }
  return out;
}
