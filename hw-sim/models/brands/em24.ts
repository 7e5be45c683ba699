// Carlo Gavazzi EM24-DIN (and EM340) three-phase energy meter.
//
// Documents: Carlo Gavazzi "EM24-DIN communication protocol" (version 3, revision
// 2012) and "EM330/EM340 communication protocol" (V1.x). Read from their public
// quotations in volkszaehler/mbmd (meters/rs485/carlogavazzi-em24.go and
// carlogavazzi-ex3x0.go, the meter library behind evcc's cg-em24 template) and an
// EM24 emulator's register list (IDCode 0x000B = 1648, serial 0x5000).
//
// Numbering: the documents give hex PDU addresses (no minus one); function 3 and 4
// both read the same table. Word order: INT32 values are LOW word first (LSW at the
// lower address). Scales: V x10, A x1000, W x10, PF x1000, Hz x10, kWh x10. The two
// variants share 0x0000..0x002C; after it the EM24 has PF at 0x0032, Hz 0x0037,
// kWh(+) 0x0042, kWh(-) 0x005C, and the EM340 PF at 0x002E, Hz 0x0033, kWh(+) 0x0034,
// kWh(-) 0x004E (`variant`).
// Identity: 0x000B holds the Carlo Gavazzi identification code (EM24-DIN AV9: 1648;
// EM340: 341), 0x5000 the serial (7 registers, ASCII). In the EM24 table 0x000B sits
// inside the L3-L1 voltage (whose high word is always 0 at mains voltages); as the
// document shows, a read of 0x000B gives the code. System power is signed, positive =
// import. Writes are refused with exception 2 (no settings simulated).
import { DeviceBase, type DeviceView } from "../device.js";
import { ModbusException, ILLEGAL_ADDRESS } from "../../modbus-pdu.js";
import type { SiteModel } from "../../site-model.js";
import { hashString } from "../../random.js";
import { round1 } from "../sunspec-devices.js";
import { MeterCounters, meteredW } from "./hybrid.js";
import { RegisterMap, enc, reg } from "./register-map.js";

const LO = "lo-hi" as const;

export class Em24 extends DeviceBase {
  readonly model = "em24";
  private readonly map: RegisterMap;
  private readonly counters: MeterCounters;

  constructor(
    private readonly spec: { name: string; unit: number; reads: "grid" | "load"; variant: "em24" | "em340"; serial?: string },
    private readonly site: SiteModel,
  ) {
    super(spec.name, spec.unit);
    const serial = spec.serial ?? `BX${(((hashString(spec.name) ^ site.seed) >>> 0) % 1e9).toString().padStart(9, "0")}`;
    const w = () => meteredW(site, spec.reads);
    const i32 = (get: () => number) => reg.ro(2, () => enc.s32(get(), LO));
    const v10 = () => site.voltage_v * 10;
    const a1000 = () => (Math.abs(w()) / 3 / site.voltage_v) * 1000;
    this.counters = new MeterCounters(site, spec.reads, spec.name);
    const pf = () => reg.ro(1, () => [1000]);
    // The EM24-DIN and the EM330/340 share the first block and differ after 0x002C.
    const tail: Array<[number, ReturnType<typeof reg.ro>]> =
      spec.variant === "em24"
        ? [
            [0x0032, pf()], // PF L1, x1000
            [0x0033, pf()], // PF L2
            [0x0034, pf()], // PF L3
            [0x0035, pf()], // PF sys
            [0x0037, reg.ro(1, () => enc.u16(site.frequency_hz * 10))], // Hz, x10
            [0x0042, i32(() => this.counters.importWh / 100)], // kWh (+) TOT, x10
            [0x005c, i32(() => this.counters.exportWh / 100)], // kWh (-) TOT, x10
          ]
        : [
            [0x002e, pf()], // PF L1, x1000
            [0x002f, pf()], // PF L2
            [0x0030, pf()], // PF L3
            [0x0031, pf()], // PF sys
            [0x0033, reg.ro(1, () => enc.u16(site.frequency_hz * 10))], // Hz, x10
            [0x0034, i32(() => this.counters.importWh / 100)], // kWh (+) TOT, x10
            [0x004e, i32(() => this.counters.exportWh / 100)], // kWh (-) TOT, x10
          ];
    this.map = new RegisterMap([
      [0x0000, i32(v10)], // V L1-N, x10
      [0x0002, i32(v10)], // V L2-N
      [0x0004, i32(v10)], // V L3-N
      [0x0006, i32(() => v10() * Math.sqrt(3))], // V L1-L2
      [0x0008, i32(() => v10() * Math.sqrt(3))], // V L2-L3
      [0x000a, reg.ro(1, () => [Math.round(v10() * Math.sqrt(3)) & 0xffff])], // V L3-L1, low word
      [0x000b, reg.fixed([spec.variant === "em340" ? 341 : 1648])], // identification code
      [0x000c, i32(a1000)], // A L1, x1000
      [0x000e, i32(a1000)], // A L2
      [0x0010, i32(a1000)], // A L3
      [0x0012, i32(() => (w() / 3) * 10)], // W L1, x10
      [0x0014, i32(() => (w() / 3) * 10)], // W L2
      [0x0016, i32(() => (w() / 3) * 10)], // W L3
      [0x0028, i32(() => w() * 10)], // W sys, x10 (+ = import)
      [0x002a, i32(() => Math.abs(w()) * 10)], // VA sys, x10
      [0x002c, i32(() => 0)], // var sys, x10
      ...tail,
      [0x0302, reg.fixed([0x0103])], // firmware version/revision
      [0x5000, reg.ro(7, () => enc.str(serial, 7))], // serial number
    ]);
  }

  override readHolding(address: number, count: number): number[] {
    this.site.advance();
    return this.map.read(address, count);
  }
  override readInput(address: number, count: number): number[] {
    return this.readHolding(address, count);
  }
  override writeHolding(_address: number, _values: number[]): void {
    throw new ModbusException(ILLEGAL_ADDRESS);
  }

  view(): DeviceView {
    return {
      power_w: round1(meteredW(this.site, this.spec.reads)),
      energy_import_wh: round1(this.counters.importWh),
      energy_export_wh: round1(this.counters.exportWh),
      reads: this.spec.reads,
    };
  }
}
