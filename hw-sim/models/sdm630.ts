// An Eastron SDM630-style three-phase meter: float32 input registers (function 4, high
// word first), a few holding registers (meter id, baud code, serial). It reads the site's
// grid connection, import positive. Reads over 80 registers are refused, as real units do.
import type { DeviceView } from "./device.js";
import type { SiteModel } from "../site-model.js";
import { round1 } from "./sunspec-devices.js";
import { EastronMeterBase } from "./eastron-meter.js";

export class Sdm630 extends EastronMeterBase {
  readonly model = "sdm630";

  /** The test hook `nan` (`POST /devices/<name> {"nan": true}`): every float input register reads NaN. */
  constructor(spec: { name: string; unit: number; serial?: number; max_read_regs?: number }, site: SiteModel) {
    super(spec, site);
    this.maxReadRegs = spec.max_read_regs ?? 80;
  }

  /** Input register value by even address; undefined = not mapped. */
  protected value(addr: number): number | undefined {
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
