// A relay board: N coils (functions 1, 5, 15), each switching a load on the site.
// Coils start closed (loads on): shedding opens them.
import { DeviceBase, type DeviceView } from "./device.js";
import { ModbusException, ILLEGAL_ADDRESS } from "../modbus-pdu.js";
import type { SiteLoad, SiteModel } from "../site-model.js";

export class Relay extends DeviceBase implements SiteLoad {
  readonly model = "relay";
  readonly coils: boolean[];

  constructor(
    spec: { name: string; unit: number; coils: number; load_per_coil_w: number },
    private readonly site: SiteModel,
    private readonly perCoilW = spec.load_per_coil_w,
  ) {
    super(spec.name, spec.unit);
    this.coils = new Array<boolean>(spec.coils).fill(true);
    site.loads.push(this);
  }

  loadW(): number {
    return this.coils.filter(Boolean).length * this.perCoilW;
  }

  private check(address: number, count: number): void {
    if (address + count > this.coils.length) throw new ModbusException(ILLEGAL_ADDRESS);
  }

  override readCoils(address: number, count: number): boolean[] {
    this.check(address, count);
    return this.coils.slice(address, address + count);
  }

  override writeCoils(address: number, values: boolean[]): void {
    this.check(address, values.length);
    this.site.advance();
    values.forEach((v, i) => (this.coils[address + i] = v));
    this.site.advance();
  }

  view(): DeviceView {
    return { power_w: -this.loadW(), coils: [...this.coils], load_w: this.loadW() };
  }

  override set(values: Record<string, unknown>): void {
    const { coils, ...rest } = values;
    if (coils !== undefined) {
      if (!Array.isArray(coils) || coils.length !== this.coils.length || !coils.every((c) => typeof c === "boolean"))
        throw new Error(`coils must be ${this.coils.length} booleans`);
      this.writeCoils(0, coils as boolean[]);
    }
    super.set(rest);
  }
}
