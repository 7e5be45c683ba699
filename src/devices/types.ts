// Contracts between the device registry (api side), the Modbus engine (pairing,
// polling) and device sync. Owned here so no module imports another's internals.
import type { DeviceConfig } from "../config/device-schema.js";
import type { Role } from "./roles.js";

/**
 * A device's decoded readings by their wire names (B6: power_w, soc_pct, state, ...). `state`
 * is whatever the profile reads there (a SunSpec inverter's St, a relay's coil bit mask):
 * code reads it through the profile's op-mode map or the device's `coils_on`, never by name.
 */
export type Metrics = Record<string, number>;

/** What a device is and what device sync (B5) publishes about it; comes from the profile and discovery. */
export interface DeviceDescriptor {
  role: Role;
  /** The wire code device sync publishes for the role (roles.ts), kept with it so a stored descriptor reads the same in every release. */
  device_type: number;
  max_power_w?: number;
  capabilities: Array<"telemetry" | "charge" | "discharge" | "shed" | "restore" | "curtail">;
  /** Profile name actually used (e.g. "sunspec"). */
  profile: string;
  /** Identity read while pairing (manufacturer, model, serial, ...). */
  identity: Record<string, string>;
}

export interface RegisteredDevice {
  config: DeviceConfig;
  descriptor: DeviceDescriptor | null;
  /** False after REGISTRY_WRITE_FAILED: stored, polled, but not used for dispatch nor listed in device sync. */
  fully_configured: boolean;
  updated_at: string;
}

/** The persisted registry as seen by the poller and the dispatcher. */
export interface DeviceSource {
  list(): RegisteredDevice[];
  get(deviceId: string): RegisteredDevice | undefined;
}

/** 0 unknown, 1 local automatic, 2 under remote dispatch, 3 standby, 4 fault (B5). */
export type OpMode = 0 | 1 | 2 | 3 | 4;

export interface DeviceHealth {
  online: boolean;
  last_ok_at: string | null;
  last_error: string | null;
  consecutive_failures: number;
  op_mode: OpMode;
}

export interface HealthView {
  health(device_id: string): DeviceHealth | undefined;
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
