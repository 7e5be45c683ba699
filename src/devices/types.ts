// Contracts between the device registry (api side), the Modbus engine (pairing,
// polling) and device sync. Owned here so no module imports another's internals.
import type { DeviceConfig } from "../config/device-schema.js";

export type { DeviceDescriptor, DeviceHealth, Metrics, OpMode } from "../model/device.js";
import type { DeviceDescriptor } from "../model/device.js";

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

/** What configuring one entry came to (spec 2.7's per-device result). */
export interface ConfigureResult {
  device_id: string;
  status: "accepted" | "error";
  code?: "PAIRING_FAILED" | "REGISTRY_WRITE_FAILED";
  message: string;
}

/**
 * Configures device entries through the pairing pipeline (pairing.ts): each is paired and
 * check-written, then stored or refused; one result per entry, in order.
 */
export interface DeviceConnector {
  configure(devices: DeviceConfig[]): Promise<ConfigureResult[]>;
}
