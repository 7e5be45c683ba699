// Sungrow SH hybrid inverter (SH-RT / SH-RS) with its battery.
//
// Document: Sungrow "Communication Protocol of Residential Hybrid Inverter" (V1.1.11,
// as quoted publicly). Read from its public quotations in
// mkaiser/Sungrow-SHx-Inverter-Modbus-Home-Assistant (modbus_sungrow.yaml: each
// `address` is the document's register minus one, with the document's number in a
// comment, and notes where the datasheet and the devices differ) and
// AlexanderLanin/homeassistant-sungrow.
//
// Numbering: the document counts registers from 1; the wire (PDU) address is the
// document's number minus 1. Every address below is the PDU address, with the
// document's number in the comment. Running values are input registers (function 4),
// settings and the EMS control are holding registers (function 3/6/16).
// Word order: 32-bit values are LOW word first. Battery power 13022 is a magnitude (U16)
// with its direction in the power-flow bits 13001 (bit 1 charging, bit 2 discharging);
// V1.1.11 adds a signed battery power at 5214 (S32, positive = discharging). Export
// power 13010 is signed, positive = feeding the grid; the meter's active power 5601 is
// positive = buying from the grid. "Not available": 0xFFFF (an absent MPPT 3 reads so).
// The forced power 13052 is in W on the SH-RT (the datasheet's "0..100 %" is not what
// the devices do).
// The battery's max charge/discharge power 33047/33048 take 0.01 kW from 1 (0 is refused).
// Control: EMS mode 13050 (doc) = 2 forced, then the command 13051 (0xAA charge, 0xBB
// discharge, 0xCC stop) and the power 13052 (W). Mode 0 is self-consumption. The
// document gives no timeout: a forced mode stays until it is changed. Values outside
// the documented ranges are refused with exception 3; undocumented addresses answer
// exception 2, and so do reads beyond the document's blocks; a reserved register inside a
// block reads 0 (the integrations read these blocks whole).
// Firmware without the battery power limits (`power_limits: false`): a field report
// of an SH whose firmware has no 33047/33048 and answers exception 2 there;
// which firmware versions lack them is not in the sources at hand. The model then answers
// exception 2 for that whole block and limits the battery by its own rating alone.
import { HybridInverter, type HybridSpec, type Target } from "./hybrid.js";
import { RegisterMap, enc, reg, codec, setting, type RegDef } from "./register-map.js";
import type { SiteModel } from "../../site-model.js";

/** Device type codes of the document's appendix for the SH-RT range. */
const TYPE_CODES: Record<number, number> = { 5000: 0x0e00, 6000: 0x0e01, 8000: 0x0e02, 10000: 0x0e03 };

export const SUNGROW_EMS = { self: 0, forced: 2, external: 3, vpp: 4 } as const;
export const SUNGROW_CMD = { charge: 0xaa, discharge: 0xbb, stop: 0xcc } as const;

export class SungrowSh extends HybridInverter {
  readonly model = "sungrow-sh";
  emsMode = 0;
  cmd: number = SUNGROW_CMD.stop;
  forcedW = 0;
  maxSoc = 1000; // 0.1 %
  minSoc = 50;
  maxChargeW: number;
  maxDischargeW: number;
  readonly ratedW: number;
  protected readonly input: RegisterMap;
  protected readonly holding: RegisterMap;

  constructor(spec: HybridSpec & { rated_power_w: number; power_limits?: boolean }, site: SiteModel) {
    super(spec, site, "A2", 9);
    this.ratedW = spec.rated_power_w;
    this.maxChargeW = spec.max_power_w;
    this.maxDischargeW = spec.max_power_w;
    const lo = "lo-hi" as const;
    const bat = () => this.batteryW();
    const runningState = () => {
      const b = bat();
      const g = site.grid();
      return (this.pvW() > 0 ? 1 : 0) | (b < 0 ? 2 : 0) | (b > 0 ? 4 : 0) | 8 | (g < 0 ? 16 : 0) | (g > 0 ? 32 : 0);
    };
    this.input = new RegisterMap(
      [
        [4989, reg.ro(10, () => enc.str(this.serial, 10))], // 4990 serial number (UTF-8)
        [4999, reg.ro(1, () => [TYPE_CODES[this.ratedW] ?? 0x0e03])], // 5000 device type code
        [5000, reg.ro(1, () => enc.u16(this.ratedW / 100))], // 5001 nominal output power, 0.1 kW
        [5001, reg.fixed([2])], // 5002 output type: 2 = 3P4L
        [5002, reg.ro(1, () => enc.u16(0))], // 5003 daily output energy, 0.1 kWh
        [5003, reg.ro(2, () => enc.u32(this.acOutWh / 100, lo))], // 5004 total output energy, 0.1 kWh
        [5007, reg.ro(1, () => enc.s16(300 + Math.abs(bat()) / 50))], // 5008 internal temperature, 0.1 degC
        [5014, reg.fixed([0xffff])], // 5015 MPPT3 voltage: not available on a two-tracker model
        [5015, reg.fixed([0xffff])], // 5016 MPPT3 current: not available
        [5016, reg.ro(2, () => enc.u32(this.pvW(), lo))], // 5017 total DC power, W
        [5213, reg.ro(2, () => enc.s32(bat(), lo))], // 5214 battery power, W (+ = discharging)
        [5600, reg.ro(2, () => enc.s32(site.grid(), lo))], // 5601 meter active power, W (+ = buying)
        [12999, reg.fixed([0x0040])], // 13000 running state: running
        [13000, reg.ro(1, () => [runningState()])], // 13001 power flow status bits
        [13001, reg.ro(1, () => enc.u16(0))], // 13002 daily PV generation
        [13002, reg.ro(2, () => enc.u32(this.pvWh / 100, lo))], // 13003 total PV generation, 0.1 kWh
        [13007, reg.ro(2, () => enc.s32(this.site.baseLoadW(), lo))], // 13008 load power, W
        [13009, reg.ro(2, () => enc.s32(-site.grid(), lo))], // 13010 export power, W (+ = export)
        [13019, reg.ro(1, () => enc.u16(this.batteryV() * 10))], // 13020 battery voltage, 0.1 V
        [13020, reg.ro(1, () => enc.u16((Math.abs(bat()) / this.batteryV()) * 10))], // 13021 battery current, 0.1 A
        [13021, reg.ro(1, () => enc.u16(Math.abs(bat())))], // 13022 battery power, W (magnitude)
        [13022, reg.ro(1, () => enc.u16(this.soc * 10))], // 13023 battery level (SOC), 0.1 %
        [13023, reg.fixed([1000])], // 13024 battery state of health, 0.1 %
        [13024, reg.ro(1, () => enc.s16(250))], // 13025 battery temperature, 0.1 degC
        [13026, reg.ro(2, () => enc.u32(this.dischargedWh / 100, lo))], // 13027 total battery discharge energy, 0.1 kWh
        [13033, reg.ro(2, () => enc.s32(this.acPowerW(), lo))], // 13034 total active power, W
        [13040, reg.ro(2, () => enc.u32(this.chargedWh / 100, lo))], // 13041 total battery charge energy, 0.1 kWh
      ],
      {
        blocks: [
          [4949, 5149],
          [5199, 5249],
          [5599, 5649],
          [12999, 13099],
        ],
      },
    );
    const u16rw = setting(codec.u16);
    const limits = spec.power_limits !== false;
    const limitRegs: Array<[number, RegDef]> = [
      [
        33046, // 33047 max battery charge power, 0.01 kW
        u16rw(
          () => Math.round(this.maxChargeW / 10),
          (v) => (this.maxChargeW = v * 10),
          (v) => v >= 1 && v * 10 <= this.maxW,
        ),
      ],
      [
        33047, // 33048 max battery discharge power, 0.01 kW
        u16rw(
          () => Math.round(this.maxDischargeW / 10),
          (v) => (this.maxDischargeW = v * 10),
          (v) => v >= 1 && v * 10 <= this.maxW,
        ),
      ],
    ];
    this.holding = new RegisterMap(
      [
        [
          13049, // 13050 EMS mode selection
          u16rw(
            () => this.emsMode,
            (v) => (this.emsMode = v),
            (v) => [0, 2, 3, 4].includes(v),
          ),
        ],
        [
          13050, // 13051 charge/discharge command
          u16rw(
            () => this.cmd,
            (v) => (this.cmd = v),
            (v) => [0xaa, 0xbb, 0xcc].includes(v),
          ),
        ],
        [
          13051, // 13052 charge/discharge power, W
          u16rw(
            () => this.forcedW,
            (v) => (this.forcedW = v),
            (v) => v <= this.maxW,
          ),
        ],
        [
          13057, // 13058 max SOC, 0.1 %
          u16rw(
            () => this.maxSoc,
            (v) => (this.maxSoc = v),
            (v) => v >= 500 && v <= 1000,
          ),
        ],
        [
          13058, // 13059 min SOC, 0.1 %
          u16rw(
            () => this.minSoc,
            (v) => (this.minSoc = v),
            (v) => v <= 500,
          ),
        ],
        ...(limits ? limitRegs : []),
      ],
      {
        blocks: limits
          ? [
              [12999, 13099],
              [32999, 33149],
            ]
          : [[12999, 13099]],
      },
    );
  }

  batteryV(): number {
    return 200 + this.soc * 0.5;
  }

  protected target(): Target {
    const floor = this.minSoc / 10;
    if (this.emsMode !== SUNGROW_EMS.forced) {
      return { mode: "self-consumption", minSoc: floor, maxChargeW: this.maxChargeW, maxDischargeW: this.maxDischargeW };
    }
    if (this.cmd === SUNGROW_CMD.charge) {
      return { mode: "forced", w: -Math.min(this.forcedW, this.maxChargeW), minSoc: floor, maxSoc: this.maxSoc / 10 };
    }
    if (this.cmd === SUNGROW_CMD.discharge) {
      return { mode: "forced", w: Math.min(this.forcedW, this.maxDischargeW), minSoc: floor, maxSoc: this.maxSoc / 10 };
    }
    return { mode: "idle" };
  }
}
