// Eastron SDM72D-M (V2, three-phase) and SDM120-Modbus (single-phase) energy meters.
//
// Documents: Eastron "SDM72D-M-2 Modbus protocol" (V1.x) and "SDM120-Modbus protocol"
// (V2.x). Read from their public quotations in volkszaehler/mbmd (meters/rs485/sdm120.go,
// sdm72v2.go; the meter library behind evcc's Eastron templates), ilseh/Oppleo
// (SDM120.py) and the VenusOS community drivers for SDM120 / SDM72D v2 (product code
// at 0xFC02). The SDM72D-M of the first version has only the totals (0x0034, 0x0048,
// 0x004A, 0x0156); this model is the V2, which adds the per-phase values.
//
// Numbering: the documents list "30001"-style register numbers counted from 1 together
// with the hex PDU address; the wire address is the hex one (30001 -> 0x0000). Every
// measurement is an IEEE 754 float32 in input registers (function 4), HIGH word first.
// Settings and identity are holding registers (function 3): meter id 0x0014, baud
// 0x001C (floats), the SDM72's phase configuration 0x000A (float, 3 = 3P4W), serial
// 0xFC00 (U32), product code 0xFC02 (U16: SDM120 32, SDM72D-M V2 137, SDM630 112, as the
// VenusOS drivers probe it) and firmware version 0xFC03.
// Total power is signed, positive = import. Settings need the meter's password and are
// not simulated: writing them answers exception 3. A reserved input register inside the
// measurement block (0x0000..0x0180, the single-phase meter's L2/L3 too) reads 0.0;
// other undocumented addresses answer 2.
import type { DeviceView } from "../device.js";
import type { SiteModel } from "../../site-model.js";
import { round1 } from "../sunspec-devices.js";
import { EastronMeterBase } from "../eastron-meter.js";
import { MeterCounters, meteredW } from "./hybrid.js";

export interface MeterSpec {
  name: string;
  unit: number;
  reads: "grid" | "load";
  serial?: number;
}

abstract class EastronMeter extends EastronMeterBase {
  abstract readonly productCode: number;
  protected abstract readonly phases: 1 | 3;
  private readonly counters: MeterCounters;

  constructor(
    protected readonly spec: MeterSpec,
    site: SiteModel,
  ) {
    super(spec, site);
    this.counters = new MeterCounters(site, spec.reads, spec.name);
  }

  protected w(): number {
    return meteredW(this.site, this.spec.reads);
  }

  /** Float value by even PDU address, or undefined when the document has no such register. */
  protected value(addr: number): number | undefined {
    const s = this.site;
    const w = this.w();
    const n = this.phases;
    const ph = w / n;
    const amps = Math.abs(ph) / s.voltage_v;
    const perPhase = (base: number, v: number) => (addr >= base && addr < base + 2 * n ? v : undefined);
    return (
      perPhase(0x00, s.voltage_v) ??
      perPhase(0x06, amps) ??
      perPhase(0x0c, ph) ??
      perPhase(0x12, Math.abs(ph)) ??
      perPhase(0x18, 0) ??
      perPhase(0x1e, 1) ??
      this.totals(addr, w) ??
      (addr <= 0x180 ? 0 : undefined)
    );
  }

  private totals(addr: number, w: number): number | undefined {
    const s = this.site;
    switch (addr) {
      case 0x34:
        return this.phases === 3 ? w : undefined; // total system power, W (+ import)
      case 0x38:
        return this.phases === 3 ? Math.abs(w) : undefined; // total system VA
      case 0x3c:
        return this.phases === 3 ? 0 : undefined; // total system VAr
      case 0x3e:
        return this.phases === 3 ? 1 : undefined; // total system power factor
      case 0x46:
        return s.frequency_hz;
      case 0x4c:
      case 0x4e:
      case 0x158:
        return 0; // reactive energy import / export / total, kVArh
      case 0x48:
        return this.counters.importWh / 1000; // import active energy, kWh
      case 0x4a:
        return this.counters.exportWh / 1000; // export active energy, kWh
      case 0x156:
        return (this.counters.importWh + this.counters.exportWh) / 1000; // total active energy, kWh
      default:
        return undefined;
    }
  }

  protected override identity(float: (a: number, v: number) => void, word: (a: number, v: number) => void): void {
    if (this.phases === 3) float(0x0a, 3); // phase configuration: 3P4W
    word(0xfc02, this.productCode);
    word(0xfc03, 0x0104); // firmware version
  }

  view(): DeviceView {
    this.site.advance();
    return {
      power_w: round1(this.w()),
      energy_import_wh: round1(this.counters.importWh),
      energy_export_wh: round1(this.counters.exportWh),
      reads: this.spec.reads,
    };
  }
}

export class Sdm72 extends EastronMeter {
  readonly model = "sdm72";
  readonly productCode = 0x0089;
  protected readonly phases = 3;
}

export class Sdm120 extends EastronMeter {
  readonly model = "sdm120";
  readonly productCode = 0x0020;
  protected readonly phases = 1;
}
