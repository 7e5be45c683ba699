// The Modbus family's registered devices: a configure entry as stored in its persisted
// registry (registry.ts), what pairing found, and whether the check writes passed.
import type { DeviceDescriptor } from "../../model/device.js";
import type { DeviceConfig } from "../config-schema.js";

export interface RegisteredDevice {
  config: DeviceConfig;
  descriptor: DeviceDescriptor | null;
  /** False after REGISTRY_WRITE_FAILED: stored, polled, but not used for dispatch nor listed in device sync. */
  fully_configured: boolean;
  updated_at: string;
}

/** The persisted registry as the Modbus family (its devices, its polling) sees it. */
export interface DeviceSource {
  list(): RegisteredDevice[];
  get(deviceId: string): RegisteredDevice | undefined;
}
