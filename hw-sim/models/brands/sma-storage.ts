// SMA Sunny Boy Storage / Sunny Tripower Smart Energy battery inverter, SMA Modbus profile.
//
// Document: SMA "SMA Modbus Interface" technical information with the device's
// parameter list "MODBUS-HTML_SBS3.7-6.0-10" (firmware 3.x, as SMA publishes per
// device). Read from the public quotations of those lists in evcc's templates
// sma-sbs-modbus (30775, 30513, 30845 and the BMS path CmpBMS.OpMod 40236 with
// 40793..40801) and sma-si-modbus (Inverter.WModCfg.WCtlComCfg: WSpt 40149, WCtlComAct
// 40151), and a public transcription of the SBS3.7/5.0/6.0-10 list (V13) with each
// register's SMA name (30865 TotWIn, 30867 TotWOut, 41195 TmsOut, 41215 FlbWSpt).
//
// Numbering: SMA gives the register address written on the wire (no minus one). The
// device answers on unit id 3 by default. Every value is at least 32 bits: U32/S32/ENUM
// two registers, U64 four, HIGH word first. A read must cover whole values (half of
// one answers exception 2); writes take whole values only (function 16). Function 3 and
// 4 read the same values. An address of the profile's ranges that this device does not
// have reads NaN (0xFFFF words); outside the ranges, exception 2.
// "Not available" (NaN): S32 0x80000000, U32 0xFFFFFFFF, ENUM 0x00FFFFFD, U64 all ones.
// Without an SMA Energy Meter (`meter: false`) the grid values 30865/30867 (S32) and the
// grid counters 30581/30583 (U32) read NaN; the condition 30201 (ENUM) reads NaN while the
// device has none to give (`condition`, set by a test: the documented NaN of an ENUM).
// Signs: AC active power 30775 positive = feeding; battery charge (31393) and
// discharge (31395) power are two unsigned values; the active power setpoint 40149 is
// positive to discharge and negative to charge.
// Control, two paths of the profile: (1) 40151 = 802 (active) hands the battery to the
// active power setpoint 40149; 803 (inactive) returns it to the inverter's own
// self-consumption. A setpoint not refreshed within the timeout 41195
// (Inverter.CtlComCfg.WCtlCom.TmsOut, s; `revert_s` sets its value, 60 here) is replaced
// by the fallback setpoint 41215 (FlbWSpt, W, 0 unless written): the battery then holds
// that power, still under external control, until 803 is written or a new setpoint
// comes. (2) The BMS operating mode 40236: 2289 charges at the minimum
// charge power 40793, 2290 discharges at the minimum discharge power 40797, 2424
// (default) is self-consumption within the maximum charge/discharge powers 40795/40799,
// with the grid exchange setpoint 40801 (W). The list quoted names no timeout for this
// path, but the hardware has one (evcc keeps the path with a 60 s watchdog, a
// public SBS automation rewrites all six registers with a keepalive): when none of the six
// registers is written within the timeout (the model takes 41195's), the battery
// management falls back to its defaults (2424, minimums 0, maximums the rated power,
// 40801 0). A power beyond the rated battery power, or an enum value that is not in the
// list, is refused with exception 3. Path (1) wins while active.
// Write-only: 40149 and 40151 refuse reads (exception 2), as the hardware does.
// Device class 30051 (`device_class`): 8007 battery inverter (Sunny Boy Storage), 8001
// solar inverter (Sunny Tripower Smart Energy, a hybrid). On the 8001 the battery
// management path (2) has no effect, only path (1) moves the battery (evcc's maintainers,
// as a field report quotes them). Its AC rating (30231, `rated_power_w`) may exceed its
// battery's maximum (`max_power_w`), which it publishes at 40189 (charge) and 40191
// (discharge), U32 W, as an emulator written from SMA's documents reads them (SMA's
// parameter list of the 8001 was not at hand); the 8007 has neither and reads NaN there.
import { HybridInverter, type HybridSpec, type Target } from "./hybrid.js";
import { RegisterMap, check, dec, enc, reg, codec, setting } from "./register-map.js";
import { ILLEGAL_ADDRESS, ModbusException } from "../../modbus-pdu.js";
import type { SiteModel } from "../../site-model.js";

const HI = "hi-lo" as const;
export const SMA_CONTROL = { active: 802, inactive: 803 } as const;
export const SMA_CLASS = { tripowerSe: 8001, batteryInverter: 8007 } as const;
export const SMA_BMS_MODE = { auto: 1438, charge: 2289, discharge: 2290, standard: 2424 } as const;
const BMS_MODES = new Set<number>(Object.values(SMA_BMS_MODE));
const NAN_S32 = [0x8000, 0x0000];
const NAN_U32 = [0xffff, 0xffff];
/** A write-only register: a read is refused with exception 2. */
const writeOnly = (size: number, write: (words: number[]) => () => void) =>
  reg.rw(
    size,
    () => {
      throw new ModbusException(ILLEGAL_ADDRESS);
    },
    write,
  );
/** ENUM "not available" (0x00FFFFFD), as condition 30201 reads it. */
export const SMA_ENUM_NAN = 0xfffffd;

export class SmaStorage extends HybridInverter {
  readonly model = "sma-storage";
  control = SMA_CONTROL.inactive as number;
  setpointW = 0;
  setpointAt = 0;
  bmsMode = SMA_BMS_MODE.standard as number;
  chaMinW = 0;
  chaMaxW: number;
  dschMinW = 0;
  dschMaxW: number;
  gridSetpointW = 0;
  timeoutS: number;
  fallbackW = 0;
  /** The fallback setpoint replaced the partner's after the timeout. */
  fellBack = false;
  /** When one of the battery management's six registers was last written (ms). */
  bmsAt = 0;
  readonly deviceType: number;
  readonly deviceClass: number;
  /** An SMA Energy Meter is connected: the grid values read it, else NaN. */
  readonly meter: boolean;
  /** Condition 30201 (ENUM): 307 ok, or SMA_ENUM_NAN. */
  condition = 307;
  protected readonly holding: RegisterMap;
  protected get input(): RegisterMap {
    return this.holding;
  }

  /** The AC rating (30231, 30233), W; the battery's own maximum is `maxW`. */
  readonly ratedW: number;

  constructor(
    spec: HybridSpec & { revert_s: number; device_type: number; device_class: number; meter: boolean; rated_power_w?: number },
    site: SiteModel,
  ) {
    super(spec, site, "", 10);
    this.ratedW = spec.rated_power_w ?? spec.max_power_w;
    this.timeoutS = spec.revert_s;
    this.deviceType = spec.device_type;
    this.deviceClass = spec.device_class;
    this.meter = spec.meter;
    this.chaMaxW = spec.max_power_w;
    this.dschMaxW = spec.max_power_w;
    const u32set = setting(codec.u32(HI));
    const s32set = setting(codec.s32(HI));
    // The battery management's six registers: each write renews its timeout.
    const renew = (set: (v: number) => void) => (v: number) => {
      set(v);
      this.bmsAt = site.clock();
    };
    const u32rw = (get: () => number, set: (v: number) => void, ok: (v: number) => boolean) => u32set(get, renew(set), ok);
    const s32rw = (get: () => number, set: (v: number) => void, ok: (v: number) => boolean) => s32set(get, renew(set), ok);
    const watts = (v: number) => v <= this.maxW;
    const bat = () => this.batteryW();
    const u32 = (get: () => number) => reg.ro(2, () => enc.u32(get(), HI));
    const u64 = (get: () => number) => reg.ro(4, () => enc.u64(get(), HI));
    const metered = (words: () => number[], nan: number[]) => reg.ro(2, () => (this.meter ? words() : nan));
    this.holding = new RegisterMap(
      [
        [30051, u32(() => this.deviceClass)], // device class: 8007 battery inverter, 8001 solar inverter (STP SE)
        [30053, u32(() => this.deviceType)], // device type (9356 SBS3.7, 9358 SBS5.0-10, 9359 SBS6.0-10)
        [30055, reg.fixed(enc.u32(461, HI))], // vendor: 461 = SMA
        [30057, u32(() => Number(this.serial) % 0xffffffff)], // serial number
        [30201, u32(() => this.condition)], // condition (ENUM): 307 ok, NaN 0x00FFFFFD
        [30231, u32(() => this.ratedW)], // Inverter.WLim: maximum active power (the AC rating), W
        [30233, u32(() => this.ratedW)], // Inverter.WMax: nominal active power WMaxOut, W
        [30513, u64(() => this.acOutWh)], // total yield, Wh
        [30581, metered(() => enc.u32(site.importWh, HI), NAN_U32)], // Metering.GridMs.TotWhIn: grid import counter, Wh
        [30583, metered(() => enc.u32(site.exportWh, HI), NAN_U32)], // Metering.GridMs.TotWhOut: grid feed-in counter, Wh
        [30775, reg.ro(2, () => enc.s32(this.acPowerW(), HI))], // AC active power, W (+ = feeding)
        [30843, reg.ro(2, () => enc.s32((bat() / this.batteryV()) * 1000, HI))], // battery current, mA (+ = discharging)
        [30845, u32(() => this.soc)], // battery state of charge, %
        [30849, reg.ro(2, () => enc.s32(250, HI))], // battery temperature, 0.1 degC
        [30851, u32(() => this.batteryV() * 100)], // battery voltage, 0.01 V
        [30865, metered(() => enc.s32(Math.max(0, site.grid()), HI), NAN_S32)], // Metering.GridMs.TotWIn: power drawn from the grid, W (S32)
        [30867, metered(() => enc.s32(Math.max(0, -site.grid()), HI), NAN_S32)], // Metering.GridMs.TotWOut: power fed into the grid, W (S32)
        [30955, reg.ro(2, () => enc.u32(bat() < 0 ? 2292 : bat() > 0 ? 2293 : 2291, HI))], // battery status: 2291 standby, 2292 charging, 2293 discharging
        [31393, u32(() => Math.max(0, -bat()))], // battery charge power, W
        [31395, u32(() => Math.max(0, bat()))], // battery discharge power, W
        [31397, u64(() => this.chargedWh)], // battery charge energy, Wh
        [31401, u64(() => this.dischargedWh)], // battery discharge energy, Wh
        // The battery's maximum charge / discharge power, W (U32): the 8001's; the 8007 reads NaN.
        [40189, reg.ro(2, () => (this.deviceClass === SMA_CLASS.tripowerSe ? enc.u32(this.maxW, HI) : NAN_U32))],
        [40191, reg.ro(2, () => (this.deviceClass === SMA_CLASS.tripowerSe ? enc.u32(this.maxW, HI) : NAN_U32))],
        [
          40149, // active power setpoint, W (+ discharge, - charge); write-only
          writeOnly(2, (w) => {
            const v = dec.s32(w, HI);
            check(Math.abs(v) <= this.maxW);
            return () => {
              this.setpointW = v;
              this.setpointAt = site.clock();
              this.fellBack = false;
            };
          }),
        ],
        [
          40151, // control of the battery by communication: 802 active, 803 inactive; write-only
          writeOnly(2, (w) => {
            const v = dec.u32(w, HI);
            check(v === 802 || v === 803);
            return () => {
              this.control = v;
              this.setpointAt = site.clock();
            };
          }),
        ],
        [
          40236, // BMS operating mode
          u32rw(
            () => this.bmsMode,
            (v) => (this.bmsMode = v),
            (v) => BMS_MODES.has(v),
          ),
        ],
        [
          40793, // minimum battery charging power, W
          u32rw(
            () => this.chaMinW,
            (v) => (this.chaMinW = v),
            watts,
          ),
        ],
        [
          41195, // external setpoint timeout, s
          u32set(
            () => this.timeoutS,
            (v) => (this.timeoutS = v),
            (v) => v >= 1 && v <= 86400,
          ),
        ],
        [
          41215, // fallback active power setpoint, W
          s32set(
            () => this.fallbackW,
            (v) => (this.fallbackW = v),
            (v) => Math.abs(v) <= this.maxW,
          ),
        ],
        [
          40795, // maximum battery charging power, W
          u32rw(
            () => this.chaMaxW,
            (v) => (this.chaMaxW = v),
            watts,
          ),
        ],
        [
          40797, // minimum battery discharging power, W
          u32rw(
            () => this.dschMinW,
            (v) => (this.dschMinW = v),
            watts,
          ),
        ],
        [
          40799, // maximum battery discharging power, W
          u32rw(
            () => this.dschMaxW,
            (v) => (this.dschMaxW = v),
            watts,
          ),
        ],
        [
          40801, // grid exchange power setpoint, W
          s32rw(
            () => this.gridSetpointW,
            (v) => (this.gridSetpointW = v),
            () => true,
          ),
        ],
      ],
      {
        wholeReads: true,
        blocks: [
          [30001, 31499],
          [34000, 35499],
          [40001, 41299],
          [44000, 44499],
        ],
        fill: 0xffff,
      },
    );
  }

  batteryV(): number {
    return 360 + this.soc * 0.4;
  }

  protected override tick(nowMs: number): void {
    if (this.control === SMA_CONTROL.active && !this.fellBack && nowMs - this.setpointAt > this.timeoutS * 1000) {
      this.setpointW = this.fallbackW;
      this.fellBack = true;
    }
    if (!this.bmsDefault() && nowMs - this.bmsAt > this.timeoutS * 1000) {
      this.bmsMode = SMA_BMS_MODE.standard;
      this.chaMinW = 0;
      this.dschMinW = 0;
      this.chaMaxW = this.maxW;
      this.dschMaxW = this.maxW;
      this.gridSetpointW = 0;
    }
  }

  /** The battery management holds its defaults (nothing to fall back from). */
  private bmsDefault(): boolean {
    return (
      this.bmsMode === SMA_BMS_MODE.standard &&
      this.chaMinW === 0 &&
      this.dschMinW === 0 &&
      this.chaMaxW === this.maxW &&
      this.dschMaxW === this.maxW &&
      this.gridSetpointW === 0
    );
  }

  protected target(): Target {
    if (this.control === SMA_CONTROL.active) return { mode: "forced", w: this.setpointW };
    if (this.deviceClass === SMA_CLASS.tripowerSe) return { mode: "self-consumption" }; // path (2) has no effect here
    if (this.bmsMode === SMA_BMS_MODE.charge) return { mode: "forced", w: -Math.min(this.chaMinW, this.chaMaxW) };
    if (this.bmsMode === SMA_BMS_MODE.discharge) return { mode: "forced", w: Math.min(this.dschMinW, this.dschMaxW) };
    return { mode: "self-consumption", maxChargeW: this.chaMaxW, maxDischargeW: this.dschMaxW };
  }
}
