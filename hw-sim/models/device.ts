// What every simulated device is: a register model on the bus plus a view of its
// physical state for the control API.
import { ModbusException, ILLEGAL_ADDRESS, type RegisterModel } from "../modbus-pdu.js";

export interface DeviceView {
  power_w: number;
  setpoint_w?: number;
  soc_pct?: number;
  coils?: boolean[];
  [k: string]: unknown;
}

export interface SimDevice extends RegisterModel {
  readonly name: string;
  readonly unit: number;
  readonly model: string;
  /** Requests within this long of a client's connect go unanswered (hw-sim/faults.ts); absent: none. */
  readonly connectDelayMs?: number;
  view(): DeviceView;
  /** Test hooks: set physical state directly (soc_pct, ...). Unknown keys throw. */
  set(values: Record<string, unknown>): void;
}

/** Base with every table absent; models override what they have. */
export abstract class DeviceBase implements SimDevice {
  abstract readonly model: string;
  maxReadRegs = 125;
  constructor(
    readonly name: string,
    readonly unit: number,
  ) {}
  abstract view(): DeviceView;
  set(values: Record<string, unknown>): void {
    const keys = Object.keys(values);
    if (keys.length) throw new Error(`device ${this.name} has no settable ${keys.join(", ")}`);
  }
  readHolding(_a: number, _c: number): number[] {
    throw new ModbusException(ILLEGAL_ADDRESS);
  }
  readInput(_a: number, _c: number): number[] {
    throw new ModbusException(ILLEGAL_ADDRESS);
  }
  writeHolding(_a: number, _v: number[]): void {
    throw new ModbusException(ILLEGAL_ADDRESS);
  }
  readCoils(_a: number, _c: number): boolean[] {
    throw new ModbusException(ILLEGAL_ADDRESS);
  }
  writeCoils(_a: number, _v: boolean[]): void {
    throw new ModbusException(ILLEGAL_ADDRESS);
  }
}

/**
 * A battery model's `soc_pct` from the control API (`POST /devices/<name>`): checked
 * (0..100), then set at the site's clock now; returns the other values for DeviceBase.set.
 */
export function takeSoc(values: Record<string, unknown>, site: { advance(): void }, set: (soc: number) => void): Record<string, unknown> {
  const { soc_pct, ...rest } = values;
  if (soc_pct !== undefined) {
    if (typeof soc_pct !== "number" || soc_pct < 0 || soc_pct > 100) throw new Error("soc_pct must be 0..100");
    site.advance();
    set(soc_pct);
  }
  return rest;
}
