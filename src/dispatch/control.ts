// What dispatch needs of the device layer: devices with their capabilities (never wire
// type numbers), a profile action resolved to raw register and coil writes, and raw reads
// and writes (the device ledger records and puts back raw values, so a release never
// depends on a scale factor or a profile that changed since).
import type { ActionName } from "../profiles/schema.js";
import type { DispatchDevice } from "./allocate.js";

/** One raw write: holding registers (words) or coils, at a resolved address. */
export interface RawWrite {
  table: "holding" | "coil";
  address: number;
  /** A sub-device's own unit id; absent: the device's unit. */
  unit?: number;
  /**
   * A write-only register. In an action's write: the words that put it back, recorded as
   * its pre-event state without a read. In the ledger's pre-event state: not read back.
   */
  restore?: number[];
  words: number[];
  coils: boolean[];
}

export interface ActionParams {
  pct?: number;
  watts?: number;
  /** The pre-event state the ledger already holds for the device: an action relative to the device's own state (a thermostat setback) is taken from it, not from what an earlier write left. */
  held?: readonly RawWrite[];
}

export interface DeviceControl {
  /** Every registered device with a descriptor, fully configured or not. */
  devices(): DispatchDevice[];
  /** The raw writes of the profile's action for this device; throws a SitegateError when it has none. */
  plan(deviceId: string, action: ActionName, params: ActionParams): Promise<RawWrite[]>;
  /** Reads `count` holding registers (words) or coils (0/1), of the sub-device `unit` when given. */
  read(deviceId: string, table: "holding" | "coil", address: number, count: number, unit?: number): Promise<number[]>;
  /**
   * Reads the registers the profile names for this action back and throws a SitegateError
   * (CONTROL_NOT_CONFIRMED) unless each holds its expected value: the device took the mode.
   */
  readBack?(deviceId: string, action: ActionName): Promise<void>;
  /** Writes in order; throws a SitegateError when the device refuses or does not answer. */
  write(deviceId: string, writes: readonly RawWrite[]): Promise<void>;
  /**
   * Reads the device's power once in the control lane, without retry, right after a
   * setpoint write; the latest values (status page, API, devices()) take it at once.
   * Resolves to what was read ({} when the device has no power point); throws when the
   * device does not answer.
   */
  confirm(deviceId: string): Promise<Record<string, number>>;
  hasAction(deviceId: string, action: ActionName): boolean;
  /** ms between rewrites of an active setpoint (0: the device holds it). */
  refreshMs(deviceId: string): number;
  setRemote(deviceId: string, remote: boolean): void;
}

/** Length of a write in registers or coils. */
export function writeLength(w: RawWrite): number {
  return w.table === "coil" ? w.coils.length : w.words.length;
}
