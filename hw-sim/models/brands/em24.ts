// Carlo Gavazzi EM24-DIN (RS-485), EM24 Ethernet (E1) and EM340 three-phase energy meters.
//
// Documents: Carlo Gavazzi "EM24-DIN communication protocol" (version 3), "EM24 E1
// communication protocol" and "EM330/EM340 communication protocol" (V1.x). Read from
// their public quotations in Victron's dbus-modbus-client (carlo_gavazzi.py: the EM24
// E1, id codes 1648..1653, and the community EM24RTU driver: EM24-DIN id codes 70..73)
// and volkszaehler/mbmd (carlogavazzi-em24.go, carlogavazzi-ex3x0.go; the meter
// library behind evcc's cg-em24 templates).
//
// Numbering: the documents give hex PDU addresses (no minus one); function 3 and 4
// both read the same table. Word order: INT32 values are LOW word first (LSW at the
// lower address). Scales: V x10, A x1000, W x10, PF x1000, Hz x10, kWh x10.
// Identity: 0x000B holds the Carlo Gavazzi identification code (EM24-DIN AV9: 70,
// EM24 E1 AV2: 1648; EM340: 341, inside the EM330/EM340 codes 330..348 less the ET
// codes 335, 336, 345 that Victron's dbus-cgwacs reads). In the
// table 0x000B sits inside the L3-L1 voltage (whose high word is always 0 at mains
// voltages); a read of 0x000B gives the code. System power 0x0028 is signed, positive
// = import. The variants share 0x0000..0x002C and differ after it (`variant`):
//   em24 (EM24-DIN RS-485): phase sequence 0x0036, Hz 0x0037, kWh(+) TOT 0x003E
//     (mbmd reads the import at 0x0042, which the model answers with the same count),
//     kWh(+) per phase 0x0046.., kWh(-) TOT 0x005C, application 0x1101 (7 = H,
//     writable), phase configuration 0x1102, serial 0x1300;
//   em24-e1 and em340: Hz 0x0033, kWh(+) TOT 0x0034, kWh(+) per phase 0x0040..,
//     kWh(-) TOT 0x004E, phase configuration 0x1002, serial 0x5000.
// Reserved registers inside the measurement block 0x0000..0x009F read 0; other
// undocumented addresses answer exception 2. Other writes answer exception 2; an
// application other than 0..7 answers 3.
import type { DeviceView } from "../device.js";
import { TableDevice } from "./table-device.js";
import { ModbusException, ILLEGAL_ADDRESS } from "../../modbus-pdu.js";
import type { SiteModel } from "../../site-model.js";
import { hashString } from "../../random.js";
import { round1 } from "../sunspec-devices.js";
import { MeterCounters, meteredW } from "./hybrid.js";
import { RegisterMap, codec, enc, reg, setting, type RegDef } from "./register-map.js";

const LO = "lo-hi" as const;
export type Em24Variant = "em24" | "em24-e1" | "em340";
const ID_CODE: Record<Em24Variant, number> = { em24: 70, "em24-e1": 1648, em340: 341 };

export class Em24 extends TableDevice {
  readonly model = "em24";
  private readonly map: RegisterMap;
  private readonly counters: MeterCounters;
  application = 7;

  constructor(
    private readonly spec: { name: string; unit: number; reads: "grid" | "load"; variant: Em24Variant; serial?: string },
    protected readonly site: SiteModel,
  ) {
    super(spec.name, spec.unit);
    const serial = spec.serial ?? `BX${(((hashString(spec.name) ^ site.seed) >>> 0) % 1e9).toString().padStart(9, "0")}`;
    const w = () => meteredW(site, spec.reads);
    const i32 = (get: () => number) => reg.ro(2, () => enc.s32(get(), LO));
    const v10 = () => site.voltage_v * 10;
    const a1000 = () => (Math.abs(w()) / 3 / site.voltage_v) * 1000;
    this.counters = new MeterCounters(site, spec.reads, spec.name);
    const imp = () => this.counters.importWh / 100;
    const exp = () => this.counters.exportWh / 100;
    const pf = () => reg.ro(1, () => [1000]);
    const hz = () => reg.ro(1, () => enc.u16(site.frequency_hz * 10));
    const perPhase = (base: number): Array<[number, RegDef]> => [0, 2, 4].map((o) => [base + o, i32(() => imp() / 3)]);
    const tail: Array<[number, RegDef]> =
      spec.variant === "em24"
        ? [
            [0x0032, pf()], // PF L1, x1000
            [0x0033, pf()], // PF L2
            [0x0034, pf()], // PF L3
            [0x0035, pf()], // PF sys
            [0x0036, reg.fixed([0])], // phase sequence: 0 = L1-L2-L3
            [0x0037, hz()], // Hz, x10
            [0x003e, i32(imp)], // kWh (+) TOT, x10
            [0x0040, i32(() => 0)], // kvarh (+) TOT, x10
            [0x0042, i32(imp)], // kWh (+) partial, x10 (never reset here)
            [0x0044, i32(() => 0)], // kvarh (+) partial
            ...perPhase(0x0046), // kWh (+) L1..L3, x10
            [0x005c, i32(exp)], // kWh (-) TOT, x10
            [
              0x1101, // application: 7 = H
              setting(codec.u16)(
                () => this.application,
                (v) => (this.application = v),
                (v) => v <= 7,
              ),
            ],
            [0x1102, reg.fixed([0])], // phase configuration: 0 = 3P.n
            [0x1300, reg.ro(7, () => enc.str(serial, 7))], // serial number
            [0x0303, reg.fixed([0x0103])], // firmware version
          ]
        : [
            [0x002e, pf()], // PF L1, x1000
            [0x002f, pf()], // PF L2
            [0x0030, pf()], // PF L3
            [0x0031, pf()], // PF sys
            [0x0033, hz()], // Hz, x10
            [0x0034, i32(imp)], // kWh (+) TOT, x10
            ...perPhase(0x0040), // kWh (+) L1..L3, x10
            [0x004e, i32(exp)], // kWh (-) TOT, x10
            [0x1002, reg.fixed([0])], // phase configuration: 0 = 3P.n
            [0x5000, reg.ro(7, () => enc.str(serial, 7))], // serial number
            [0x0304, reg.fixed([0x1104])], // firmware version
          ];
    this.map = new RegisterMap(
      [
        [0x0000, i32(v10)], // V L1-N, x10
        [0x0002, i32(v10)], // V L2-N
        [0x0004, i32(v10)], // V L3-N
        [0x0006, i32(() => v10() * Math.sqrt(3))], // V L1-L2
        [0x0008, i32(() => v10() * Math.sqrt(3))], // V L2-L3
        [0x000a, reg.ro(1, () => [Math.round(v10() * Math.sqrt(3)) & 0xffff])], // V L3-L1, low word
        [0x000b, reg.fixed([ID_CODE[spec.variant]])], // identification code
        [0x000c, i32(a1000)], // A L1, x1000
        [0x000e, i32(a1000)], // A L2
        [0x0010, i32(a1000)], // A L3
        [0x0012, i32(() => (w() / 3) * 10)], // W L1, x10
        [0x0014, i32(() => (w() / 3) * 10)], // W L2
        [0x0016, i32(() => (w() / 3) * 10)], // W L3
        [0x0028, i32(() => w() * 10)], // W sys, x10 (+ = import)
        [0x002a, i32(() => Math.abs(w()) * 10)], // VA sys, x10
        [0x002c, i32(() => 0)], // var sys, x10
        [0x0302, reg.fixed([0x0103])], // hardware version
        ...tail,
      ],
      { blocks: [[0x0000, 0x009f]] },
    );
  }

  protected tableOf(): RegisterMap {
    return this.map;
  }
  override writeHolding(address: number, values: number[]): void {
    if (address !== 0x1101 || this.spec.variant !== "em24") throw new ModbusException(ILLEGAL_ADDRESS);
    this.map.write(address, values);
  }

  view(): DeviceView {
    return {
      power_w: round1(meteredW(this.site, this.spec.reads)),
      energy_import_wh: round1(this.counters.importWh),
      energy_export_wh: round1(this.counters.exportWh),
      reads: this.spec.reads,
      variant: this.spec.variant,
    };
  }
}
