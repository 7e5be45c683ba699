// The glue between a brand model's register tables (./register-map.ts) and the bus: every
// read and write steps the site's clock first, a write once more after it (so that /state
// shows its effect), and a function whose table the device does not have answers exception 2.
import { DeviceBase } from "../device.js";
import { ModbusException, ILLEGAL_ADDRESS } from "../../modbus-pdu.js";
import type { SiteModel } from "../../site-model.js";
import type { RegisterMap } from "./register-map.js";

export abstract class TableDevice extends DeviceBase {
  protected abstract readonly site: SiteModel;

  /** The register table of a function; null: the device has none. */
  protected abstract tableOf(t: "holding" | "input"): RegisterMap | null;

  private table(t: "holding" | "input"): RegisterMap {
    const m = this.tableOf(t);
    if (!m) throw new ModbusException(ILLEGAL_ADDRESS);
    return m;
  }

  override readHolding(address: number, count: number): number[] {
    this.site.advance();
    return this.table("holding").read(address, count);
  }
  override readInput(address: number, count: number): number[] {
    this.site.advance();
    return this.table("input").read(address, count);
  }
  override writeHolding(address: number, values: number[]): void {
    this.site.advance();
    this.table("holding").write(address, values);
    this.site.advance();
  }
}
