// GoodWe ET / EH hybrid inverter (platform 745) with its battery.
//
// Document: GoodWe "ET/EH/BT/BH Series Modbus Protocol" (ARM firmware V1.x, the
// hybrid inverters' register list, tables "EMS Power Mode" 8-16). Read from its public
// quotations in marcelblijleven/goodwe (goodwe/et.py, inverter.py EMSMode, const.py)
// and OpenEMS io.openems.edge.goodwe (EmsPowerMode).
//
// Numbering: the document lists PDU addresses (35000, 47511); no minus one. Holding
// registers (function 3; writes 6/16). The inverter answers on unit id 247 by default.
// Word order: 32-bit values HIGH word first.
// Signs: battery power 35182 (S32) is positive while DISCHARGING; active power 35140
// (S16, the grid) is positive while EXPORTING.
// Control: EMS mode 47511 with the power 47512 (U16, W): 1 auto (self-use), 2 charge-PV,
// 3 discharge-PV, 4 import-AC, 5 export-AC, 6 conserve, 7 off-grid, 8 battery standby,
// 9 buy power, 10 sell power, 11 charge battery, 12 discharge battery. The document gives
// no timeout: a mode stays until it is changed; 1 (auto) returns the battery to self-use.
// Modes outside 1..12 and a power above the rated power are refused with exception 3.
// Reserved registers inside the document's blocks read 0; outside them, exception 2.
import { HybridInverter, type HybridSpec, type Target } from "./hybrid.js";
import { RegisterMap, enc, reg, codec, setting } from "./register-map.js";
import type { SiteModel } from "../../site-model.js";

const HI = "hi-lo" as const;
export const GOODWE_EMS = {
  auto: 1,
  chargePv: 2,
  dischargePv: 3,
  importAc: 4,
  exportAc: 5,
  conserve: 6,
  offGrid: 7,
  batteryStandby: 8,
  buyPower: 9,
  sellPower: 10,
  chargeBattery: 11,
  dischargeBattery: 12,
} as const;

export class GoodweEt extends HybridInverter {
  readonly model = "goodwe-et";
  emsMode = GOODWE_EMS.auto as number;
  emsPowerW = 0;
  workMode = 0;
  readonly ratedW: number;
  protected readonly input = null;
  protected readonly holding: RegisterMap;

  constructor(spec: HybridSpec & { rated_power_w: number }, site: SiteModel) {
    super(spec, site, "9010KETU", 8);
    this.ratedW = spec.rated_power_w;
    const kw = Math.round(this.ratedW / 1000);
    const bat = () => this.batteryW();
    const u16rw = setting(codec.u16);
    this.holding = new RegisterMap(
      [
        [35000, reg.fixed([0x0100])], // Modbus protocol version
        [35001, reg.ro(1, () => enc.u16(this.ratedW))], // rated power, W
        [35002, reg.fixed([1])], // AC output type: 1 three-phase four-wire
        [35003, reg.ro(8, () => enc.str(this.serial, 8))], // serial number, ASCII 16 bytes
        [35011, reg.ro(5, () => enc.str(`GW${kw}K-ET`, 5))], // model name, ASCII 10 bytes
        [35016, reg.fixed([4])], // DSP1 software version
        [35121, reg.ro(1, () => enc.u16(site.voltage_v * 10))], // on-grid L1 voltage, 0.1 V
        [35138, reg.ro(1, () => enc.s16(this.acPowerW()))], // total inverter power, W
        [35140, reg.ro(1, () => enc.s16(-site.grid()))], // active power (grid), W (+ = export)
        [35180, reg.ro(1, () => enc.u16(this.batteryV() * 10))], // battery 1 voltage, 0.1 V
        [35181, reg.ro(1, () => enc.s16((bat() / this.batteryV()) * 10))], // battery 1 current, 0.1 A
        [35182, reg.ro(2, () => enc.s32(bat(), HI))], // battery 1 power, W (+ = discharging)
        [35184, reg.ro(1, () => [bat() > 0 ? 2 : bat() < 0 ? 3 : 1])], // battery mode: 1 standby, 2 discharge, 3 charge
        [35187, reg.fixed([1])], // work mode: 1 normal (on-grid)
        [35191, reg.ro(2, () => enc.u32(this.pvWh / 100, HI))], // total PV generation, 0.1 kWh
        [35206, reg.ro(2, () => enc.u32(this.chargedWh / 100, HI))], // total battery charge, 0.1 kWh
        [35209, reg.ro(2, () => enc.u32(this.dischargedWh / 100, HI))], // total battery discharge, 0.1 kWh
        [37004, reg.ro(1, () => enc.u16(this.maxW / this.batteryV()))], // BMS charge current limit, A
        [37005, reg.ro(1, () => enc.u16(this.maxW / this.batteryV()))], // BMS discharge current limit, A
        [37007, reg.ro(1, () => enc.u16(this.soc))], // battery state of charge, %
        [37008, reg.fixed([100])], // battery state of health, %
        [
          47000, // work mode setting
          u16rw(
            () => this.workMode,
            (v) => (this.workMode = v),
            (v) => v <= 5,
          ),
        ],
        [
          47511, // EMS mode
          u16rw(
            () => this.emsMode,
            (v) => (this.emsMode = v),
            (v) => v >= 1 && v <= 12,
          ),
        ],
        [
          47512, // EMS power set, W
          u16rw(
            () => this.emsPowerW,
            (v) => (this.emsPowerW = v),
            (v) => v <= this.ratedW,
          ),
        ],
      ],
      {
        blocks: [
          [35000, 35059],
          [35100, 35259],
          [36000, 36059],
          [37000, 37049],
          [47000, 47599],
        ],
      },
    );
  }

  batteryV(): number {
    return 400 + this.soc * 0.5;
  }

  protected target(): Target {
    const x = Math.min(this.emsPowerW, this.maxW);
    const pv = this.pvW();
    switch (this.emsMode) {
      case GOODWE_EMS.chargePv:
      case GOODWE_EMS.importAc:
      case GOODWE_EMS.chargeBattery:
        return { mode: "forced", w: -Math.min(this.maxW, this.emsMode === GOODWE_EMS.chargePv ? x + pv : x) };
      case GOODWE_EMS.dischargePv:
      case GOODWE_EMS.dischargeBattery:
        return { mode: "forced", w: x };
      case GOODWE_EMS.exportAc:
        return { mode: "forced", w: Math.max(0, x - pv) };
      case GOODWE_EMS.conserve:
        return { mode: "forced", w: -pv };
      case GOODWE_EMS.batteryStandby:
        return { mode: "idle" };
      default:
        return { mode: "self-consumption" };
    }
  }
}
