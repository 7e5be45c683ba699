// Huawei SUN2000 hybrid inverter (M0/M1/MB0/MAP0) with a LUNA2000 battery.
//
// Document: Huawei "Solar Inverter Modbus Interface Definitions" (V3.0, issue 2021,
// with the storage chapter of the SUN2000MA/MB Modbus interface definitions). Read from
// its public quotation in wlcrs/huawei-solar-lib (src/huawei_solar/registers.py,
// register_values.py), the library behind the huawei_solar Home Assistant integration.
//
// Numbering: the document gives protocol addresses; they are written on the wire as
// they are (no minus one). Everything is a holding register (function 3; writes 6/16).
// Word order: 32-bit values are HIGH word first. "Not available" (huawei-solar-lib's
// registers.py, each number type's invalid_value): U16 0xFFFF, I16 0x7FFF, U32
// 0xFFFFFFFF, I32 0x7FFFFFFF, U64/I64 2^63-1. Without a power meter (`meter: false`) the
// meter status 37100 reads 0 (offline, the library's METER_STATUS) and the meter's I32
// values 37113/37119/37121 read 0x7FFFFFFF.
// Signs: battery charge/discharge power (37765) is positive while CHARGING; the meter's
// active power (37113) is positive while FEEDING the grid; inverter active power
// (32080) positive = output.
// Control: forcible charge/discharge. Power in 47247 (charge) / 47249 (discharge),
// W, at most the maximum charging/discharging power (47075/47077); the duration in
// 47083 (minutes, 0..1440) with setting mode 47246 = 0, or a target SOC in 47101 with
// mode 1; then 47100 = 1 (charge) or 2 (discharge); 0 stops. The forcible command ends
// by itself when its duration has run out (or the target SOC is reached) and the
// battery returns to its working mode (47086, 2 = maximise self-consumption).
// The working mode in force reads back at 37006 (1 forcible charge/discharge, 4 maximise
// self-consumption, 6 time of use). Out-of-range writes are refused with exception 3;
// undocumented addresses answer 2, except reserved registers inside the document's
// blocks, which read 0 (a block read is answered whole).
// Timing: huawei-solar-lib's TCP client waits 1 s after connecting before its first
// request (wait_after_connect=1.0, "the SDongle can react quite slowly"), allows 10 s for
// an answer and keeps 50 ms between requests; other public clients wait up to 5 s. The
// sources give the clients' wait, not the device's own: a device that answered only
// later than 1 s would fail those clients in the field. The model answers nothing to a
// request within `connect_delay_ms` (800 ms) of its accepting a connection
// (hw-sim/faults.ts), so a client waiting 1 s from its connect is answered (the accept
// can come a little after the client's connect completes) and one that does not wait is not.
import { HybridInverter, type HybridSpec, type Target } from "./hybrid.js";
import { RegisterMap, enc, reg, codec, setting } from "./register-map.js";
import type { SiteModel } from "../../site-model.js";

const HI = "hi-lo" as const;
/** I32 "not available". */
const I32_NAN = [0x7fff, 0xffff];
export const HUAWEI_FORCIBLE = { stop: 0, charge: 1, discharge: 2 } as const;
export const HUAWEI_WORKING_MODE = { adaptive: 0, fixed: 1, selfConsumption: 2, touLg: 3, fullyFedToGrid: 4, touLuna: 5 } as const;

export class HuaweiSun2000 extends HybridInverter {
  readonly model = "huawei-sun2000";
  forcible = 0;
  forcibleStartedAt = 0;
  settingMode = 0; // 0 duration, 1 target SOC
  periodMin = 0;
  targetSoc = 1000; // 0.1 %
  chargePowerW = 0;
  dischargePowerW = 0;
  maxChargingW: number;
  maxDischargingW: number;
  workingMode = HUAWEI_WORKING_MODE.selfConsumption as number;
  chargeCutoff = 1000; // 0.1 %
  dischargeCutoff = 50;
  readonly ratedW: number;
  /** A power meter is connected (37100 normal); false: its values read the I32 NaN. */
  readonly meter: boolean;
  protected readonly input = null;
  protected readonly holding: RegisterMap;

  constructor(spec: HybridSpec & { rated_power_w: number; meter?: boolean }, site: SiteModel) {
    super(spec, site, "HV", 10);
    this.ratedW = spec.rated_power_w;
    this.meter = spec.meter !== false;
    const metered = (get: () => number) => reg.ro(2, () => (this.meter ? enc.s32(get(), HI) : I32_NAN));
    this.maxChargingW = spec.max_power_w;
    this.maxDischargingW = spec.max_power_w;
    const kw = Math.round(this.ratedW / 1000);
    const u16 = setting(codec.u16);
    const u32 = setting(codec.u32(HI));
    const bat = () => this.batteryW();
    this.holding = new RegisterMap(
      [
        [30000, reg.ro(15, () => enc.str(`SUN2000-${kw}KTL-M1`, 15))], // model name
        [30015, reg.ro(10, () => enc.str(this.serial, 10))], // SN
        [30025, reg.ro(10, () => enc.str("01074486", 10))], // PN
        [30070, reg.fixed([428])], // model ID
        [30071, reg.fixed([2])], // number of PV strings
        [30072, reg.fixed([2])], // number of MPP trackers
        [30073, reg.ro(2, () => enc.u32(this.ratedW, HI))], // rated power Pn, W
        [30075, reg.ro(2, () => enc.u32(this.ratedW * 1.1, HI))], // maximum active power Pmax, W
        [32064, reg.ro(2, () => enc.s32(this.pvW(), HI))], // input (DC) power, W
        [32080, reg.ro(2, () => enc.s32(this.acPowerW(), HI))], // active power, W (+ = output)
        [32085, reg.ro(1, () => enc.u16(site.frequency_hz * 100))], // grid frequency, 0.01 Hz
        [32087, reg.ro(1, () => enc.s16(350))], // internal temperature, 0.1 degC
        [32089, reg.fixed([0x0200])], // device status: on-grid
        [32106, reg.ro(2, () => enc.u32(this.acOutWh / 10, HI))], // accumulated yield, 0.01 kWh
        [37000, reg.ro(1, () => [bat() === 0 ? 1 : 2])], // storage unit 1 running status
        [37001, reg.ro(2, () => enc.s32(-bat(), HI))], // storage unit 1 charge/discharge power, W (+ = charging)
        [37004, reg.ro(1, () => enc.u16(this.soc * 10))], // storage unit 1 SOC, 0.1 %
        [37006, reg.ro(1, () => [this.runningMode()])], // storage unit 1 working mode (read-back of the mode in force)
        [37046, reg.ro(2, () => enc.u32(this.maxW, HI))], // storage maximum charge power, W
        [37048, reg.ro(2, () => enc.u32(this.maxW, HI))], // storage maximum discharge power, W
        [37100, reg.ro(1, () => [this.meter ? 1 : 0])], // meter status: 1 normal, 0 offline (no meter)
        [37113, metered(() => -site.grid())], // meter active power, W (+ = feeding the grid)
        [37119, metered(() => site.exportWh / 10)], // grid exported energy, 0.01 kWh
        [37121, metered(() => site.importWh / 10)], // grid accumulated (imported) energy, 0.01 kWh
        [37758, reg.ro(2, () => enc.u32(this.capWh, HI))], // storage rated capacity, Wh
        [37760, reg.ro(1, () => enc.u16(this.soc * 10))], // storage state of capacity, 0.1 %
        [37762, reg.ro(1, () => [bat() === 0 ? 1 : 2])], // storage running status: 1 standby, 2 running
        [37765, reg.ro(2, () => enc.s32(-bat(), HI))], // storage charge/discharge power, W (+ = charging)
        [37780, reg.ro(2, () => enc.u32(this.chargedWh / 10, HI))], // storage total charge, 0.01 kWh
        [37782, reg.ro(2, () => enc.u32(this.dischargedWh / 10, HI))], // storage total discharge, 0.01 kWh
        [47000, reg.fixed([2])], // storage unit 1 product model: 2 = HUAWEI-LUNA2000
        [
          47075, // maximum charging power, W
          u32(
            () => this.maxChargingW,
            (v) => (this.maxChargingW = v),
            (v) => v <= this.maxW,
          ),
        ],
        [
          47077, // maximum discharging power, W
          u32(
            () => this.maxDischargingW,
            (v) => (this.maxDischargingW = v),
            (v) => v <= this.maxW,
          ),
        ],
        [
          47081, // charging cutoff capacity, 0.1 %
          u16(
            () => this.chargeCutoff,
            (v) => (this.chargeCutoff = v),
            (v) => v >= 900 && v <= 1000,
          ),
        ],
        [
          47082, // discharging cutoff capacity, 0.1 %
          u16(
            () => this.dischargeCutoff,
            (v) => (this.dischargeCutoff = v),
            (v) => v <= 200,
          ),
        ],
        [
          47083, // forcible charge/discharge period, minutes
          u16(
            () => this.periodMin,
            (v) => (this.periodMin = v),
            (v) => v <= 1440,
          ),
        ],
        [
          47086, // working mode settings
          u16(
            () => this.workingMode,
            (v) => (this.workingMode = v),
            (v) => v <= 5,
          ),
        ],
        [
          47100, // forcible charge/discharge: 0 stop, 1 charge, 2 discharge
          u16(
            () => this.forcible,
            (v) => {
              this.forcible = v;
              this.forcibleStartedAt = site.clock();
            },
            (v) => v <= 2,
          ),
        ],
        [
          47101, // forcible charge/discharge target SOC, 0.1 %
          u16(
            () => this.targetSoc,
            (v) => (this.targetSoc = v),
            (v) => v >= 120 && v <= 1000,
          ),
        ],
        [
          47246, // forcible charge/discharge setting mode: 0 duration, 1 target SOC
          u16(
            () => this.settingMode,
            (v) => (this.settingMode = v),
            (v) => v <= 1,
          ),
        ],
        [
          47247, // forcible charge power, W
          u32(
            () => this.chargePowerW,
            (v) => (this.chargePowerW = v),
            (v) => v <= this.maxChargingW,
          ),
        ],
        [
          47249, // forcible discharge power, W
          u32(
            () => this.dischargePowerW,
            (v) => (this.dischargePowerW = v),
            (v) => v <= this.maxDischargingW,
          ),
        ],
      ],
      {
        blocks: [
          [30000, 30099],
          [32000, 32119],
          [37000, 37139],
          [37700, 37829],
          [47000, 47299],
        ],
      },
    );
  }

  /** The working mode in force as 37006 reports it: 1 forcible, else the setting's code in that list. */
  runningMode(): number {
    if (this.forcible !== HUAWEI_FORCIBLE.stop) return 1;
    return [0, 3, 4, 2, 5, 6][this.workingMode] ?? 0;
  }

  protected override tick(nowMs: number): void {
    if (this.forcible === HUAWEI_FORCIBLE.stop) return;
    const expired = this.settingMode === 0 && nowMs - this.forcibleStartedAt >= this.periodMin * 60_000;
    const reached =
      this.settingMode === 1 &&
      (this.forcible === HUAWEI_FORCIBLE.charge ? this.soc >= this.targetSoc / 10 : this.soc <= this.targetSoc / 10);
    if (expired || reached) this.forcible = HUAWEI_FORCIBLE.stop;
  }

  protected target(): Target {
    const floor = this.dischargeCutoff / 10;
    const ceil = this.chargeCutoff / 10;
    if (this.forcible === HUAWEI_FORCIBLE.charge) return { mode: "forced", w: -this.chargePowerW, minSoc: floor, maxSoc: ceil };
    if (this.forcible === HUAWEI_FORCIBLE.discharge) return { mode: "forced", w: this.dischargePowerW, minSoc: floor, maxSoc: ceil };
    if (this.workingMode === HUAWEI_WORKING_MODE.selfConsumption || this.workingMode === HUAWEI_WORKING_MODE.touLuna) {
      return { mode: "self-consumption", minSoc: floor, maxChargeW: this.maxChargingW, maxDischargeW: this.maxDischargingW };
    }
    return { mode: "idle" };
  }
}
