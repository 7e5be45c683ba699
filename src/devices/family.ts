// A transport family: the devices one transport reaches (Modbus through profiles, Zigbee
// through zigbee2mqtt, GPIO lines, a test's own). The registry (directory.ts) lists every
// family's devices as one; the composition root builds each family from one entry of its
// factory list (parts/families.ts), so a new transport is a folder plus that entry.
import type { Device } from "../model/device.js";

export interface DeviceFamily {
  /** "modbus", "zigbee", "gpio", ... */
  readonly family: string;
  devices(): readonly Device[];
  /** Goes up by one with every change of its device list or a descriptor (absent: the list never changes). */
  readonly version?: number;
  /** The poller reads these devices on the site clock (absent: they report on their own, and each tick takes their latest values). */
  readonly polled?: boolean;
}
