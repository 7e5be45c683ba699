// An Eastron SDM630-style three-phase meter: float32 input registers (function 4, high
// word first), a few holding registers (meter id, baud code, serial). It reads the site's
// grid connection, import positive. Reads over 80 registers are refused, as real units do.
import { DeviceBase, type DeviceView } from "./device.js";
import { ModbusException, ILLEGAL_ADDRESS, ILLEGAL_VALUE } from "../modbus-pdu.js";
import type { SiteModel } from "../site-model.js";
import { hashString } from "../random.js";
import { round1 } from "./sunspec-devices.js";

export class Sdm630 extends DeviceBase {
  readonly model = "sdm630";
  override maxReadRegs: number;
  private readonly serial: number;
  /** Test hook (`POST /devices/<name> {"nan": true}`): every float input register reads NaN, no reading available. */
  private nan = false;

  constructor(
    spec: { name: string; unit: number; serial?: number; max_read_regs?: number },
    private readonly site: SiteModel,
  ) {
    super(spec.name, spec.unit);
    this.maxReadRegs = spec.max_read_regs ?? 80;
    this.serial = spec.serial ?? ((hashString(spec.name) ^ site.seed) >>> 0) % 100_000_000;
  }

  /** Input register value by float index (address / 2); undefined = not mapped. */
  private input(addr: number): number | undefined {
    const s = this.site;
    const w = s.grid();
    const v = s.voltage_v;
    const ph = w / 3;
    const amps = Math.abs(ph) / v;
    if (addr <= 0x04) return v; // L1..L3 voltage
    if (addr <= 0x0a) return amps; // L1..L3 current
    if (addr <= 0x10) return ph; // L1..L3 active power
    if (addr <= 0x16) return Math.abs(ph); // VA
    if (addr <= 0x1c) return 0; // VAr
    if (addr <= 0x22) return 1; // power factor
    if (addr <= 0x33) return addr === 0x2a ? v : addr === 0x2e ? amps : addr === 0x30 ? amps * 3 : 0;
    if (addr === 0x34) return w; // total system power
    if (addr === 0x36 || addr === 0x3a) return 0;
    if (addr === 0x38) return Math.abs(w); // total VA
    if (addr === 0x3c) return 0; // total VAr
    if (addr === 0x3e) return 1; // total PF
    if (addr <= 0x44) return 0;
    if (addr === 0x46) return s.frequency_hz;
    if (addr === 0x48) return s.importWh / 1000; // import kWh
    if (addr === 0x4a) return s.exportWh / 1000; // export kWh
    if (addr === 0x156) return (s.importWh + s.exportWh) / 1000; // total kWh
    return undefined;
  }

  override readInput(address: number, count: number): number[] {
    this.site.advance();
    const out: number[] = [];
    const buf = Buffer.alloc(4);
    for (let a = address; a < address + count; a++) {
      const base = a & ~1;
      const v = this.input(base);
      if (v === undefined) throw new ModbusException(ILLEGAL_ADDRESS);
      buf.writeFloatBE(this.nan ? NaN : v, 0);
      out.push(buf.readUInt16BE(a === base ? 0 : 2));
    }
    return out;
  }

  override readHolding(address: number, count: number): number[] {
    const regs = new Map<number, number>();
    const f = Buffer.alloc(4);
    const putFloat = (a: number, v: number) => {
      f.writeFloatBE(v, 0);
      regs.set(a, f.readUInt16BE(0));
      regs.set(a + 1, f.readUInt16BE(2));
    };
    putFloat(0x14, this.unit); // meter id (Modbus address)
    putFloat(0x1c, 2); // baud code 2 = 9600
    regs.set(0xfc00, (this.serial >>> 16) & 0xffff);
    regs.set(0xfc01, this.serial & 0xffff);
    const out: number[] = [];
    for (let a = address; a < address + count; a++) {
      const v = regs.get(a);
      if (v === undefined) throw new ModbusException(ILLEGAL_ADDRESS);
      out.push(v);
    }
    return out;
  }

  override writeHolding(address: number, _values: number[]): void {
    // Settings need the meter's password and are not simulated; the addresses exist.
    throw new ModbusException(address === 0x14 || address === 0x1c ? ILLEGAL_VALUE : ILLEGAL_ADDRESS);
  }

  view(): DeviceView {
    return {
      power_w: round1(this.site.grid()),
      energy_import_wh: round1(this.site.importWh),
      energy_export_wh: round1(this.site.exportWh),
      serial: this.serial,
      nan: this.nan,
    };
  }

  override set(values: Record<string, unknown>): void {
    const { nan, ...rest } = values;
    if (nan !== undefined) {
      if (typeof nan !== "boolean") throw new Error("nan must be true or false");
      this.nan = nan;
    }
    super.set(rest);
  }
}
