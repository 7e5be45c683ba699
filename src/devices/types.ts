// Contracts between the front ends' services (configure, device sync) and the device
// families. Owned here so no module imports another's internals; a family's own shapes
// (the Modbus family's registered devices) live in its folder.
import type { z } from "zod";
import type { ErrorDetail } from "../errors.js";

export type { DeviceDescriptor, DeviceHealth, Metrics, OpMode } from "../model/device.js";

/** What configuring one entry came to (spec 2.7's per-device result). */
export interface ConfigureResult {
  device_id: string;
  status: "accepted" | "error";
  code?: "PAIRING_FAILED" | "REGISTRY_WRITE_FAILED";
  message: string;
}

/** A configure entry as the services see it, whatever its family: the device it names. */
export interface ConfigureEntry {
  device_id: string;
}

/**
 * What a family offers the configure request (spec 2.7): the schema of one entry of the
 * body's `devices`, the rules the entries must meet beyond it (by path `devices[i].field`),
 * and configuring them (each paired and check-written, then stored or refused; one
 * result per entry, in order). The services validate and answer through it, never
 * through the family's folder.
 */
export interface DeviceConnector<E extends ConfigureEntry = ConfigureEntry> {
  /** The family whose devices the entries become (the device_id check names it). */
  readonly family: string;
  readonly entrySchema: z.ZodType<E>;
  check(entries: readonly E[]): ErrorDetail[];
  configure(entries: E[]): Promise<ConfigureResult[]>;
}
