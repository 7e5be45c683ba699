// SMA Sunny Boy Storage / Sunny Tripower Smart Energy battery inverter, SMA Modbus profile.
//
// Document: SMA "SMA Modbus Interface" technical information with the device's
// parameter list "MODBUS-HTML_SBS3.7-6.0-10" (firmware 3.x, as SMA publishes per
// device). Read from the public quotations of those lists in evcc's template
// sma-sbs-modbus (registers 30775, 30845, 40149/40151 and its 60 s default watchdog)
// and smarthomeNG's sma_mb / smamodbus plugins.
//
// Numbering: SMA gives the register address written on the wire (no minus one). The
// device answers on unit id 3 by default. Every value is at least 32 bits: U32/S32/ENUM
// two registers, U64 four, HIGH word first. A read must cover whole values (half of
// one answers exception 2); writes take whole values only (function 16).
// "Not available" (NaN): S32 0x80000000, U32 0xFFFFFFFF, ENUM 0x00FFFFFD, U64 all ones.
// Signs: AC active power 30775 positive = feeding; battery charge (31393) and
// discharge (31395) power are two unsigned values; the active power setpoint 40149 is
// positive to discharge and negative to charge.
// Control: 40151 = 802 (active) hands the battery to the external setpoint 40149;
// 803 (inactive) returns it to the inverter's own self-consumption. Without a new
// setpoint within the fallback time (`revert_s`, 60 s here) the inverter returns to
// its own control. A setpoint beyond the rated battery power, or an enum value that is
// not in the list, is refused with exception 3.
import { HybridInverter, type HybridSpec, type Target } from "./hybrid.js";
import { RegisterMap, check, dec, enc, reg } from "./register-map.js";
import type { SiteModel } from "../../site-model.js";

const HI = "hi-lo" as const;
export const SMA_CONTROL = { active: 802, inactive: 803 } as const;
const NAN_S32 = [0x8000, 0x0000];
const ENUM_NAN = [0x00ff, 0xfffd];

export class SmaStorage extends HybridInverter {
  readonly model = "sma-storage";
  control = SMA_CONTROL.inactive as number;
  setpointW = 0;
  setpointAt = 0;
  readonly revertS: number;
  readonly deviceType: number;
  protected readonly input = null;
  protected readonly holding: RegisterMap;

  constructor(spec: HybridSpec & { revert_s: number; device_type: number }, site: SiteModel) {
    super(spec, site, "", 10);
    this.revertS = spec.revert_s;
    this.deviceType = spec.device_type;
    const bat = () => this.batteryW();
    const u32 = (get: () => number) => reg.ro(2, () => enc.u32(get(), HI));
    const u64 = (get: () => number) => reg.ro(4, () => enc.u64(get(), HI));
    this.holding = new RegisterMap(
      [
        [30051, reg.fixed(enc.u32(8007, HI))], // device class: 8007 battery inverter
        [30053, u32(() => this.deviceType)], // device type (9356 SBS 3.7-10, 9357 5.0, 9358 6.0)
        [30057, u32(() => Number(this.serial) % 0xffffffff)], // serial number
        [30201, reg.fixed(enc.u32(307, HI))], // condition: 307 ok
        [30513, u64(() => this.acOutWh)], // total yield, Wh
        [30775, reg.ro(2, () => enc.s32(this.acPowerW(), HI))], // AC active power, W (+ = feeding)
        [30843, reg.ro(2, () => enc.s32((bat() / this.batteryV()) * 1000, HI))], // battery current, mA (+ = discharging)
        [30845, u32(() => this.soc)], // battery state of charge, %
        [30849, reg.ro(2, () => enc.s32(250, HI))], // battery temperature, 0.1 degC
        [30851, u32(() => this.batteryV() * 100)], // battery voltage, 0.01 V
        [30865, u32(() => Math.max(0, -site.grid()))], // grid feed-in power (energy meter), W
        [30867, u32(() => Math.max(0, site.grid()))], // power drawn from the grid (energy meter), W
        [30955, reg.ro(2, () => enc.u32(bat() < 0 ? 2292 : bat() > 0 ? 2293 : 2291, HI))], // battery status: 2291 standby, 2292 charging, 2293 discharging
        [31393, u32(() => Math.max(0, -bat()))], // battery charge power, W
        [31395, u32(() => Math.max(0, bat()))], // battery discharge power, W
        [31397, u64(() => this.chargedWh)], // battery charge energy, Wh
        [31401, u64(() => this.dischargedWh)], // battery discharge energy, Wh
        [
          40149, // active power setpoint, W (+ discharge, - charge); reads NaN
          reg.rw(
            2,
            () => NAN_S32,
            (w) => {
              const v = dec.s32(w, HI);
              check(Math.abs(v) <= this.maxW);
              return () => {
                this.setpointW = v;
                this.setpointAt = site.clock();
              };
            },
          ),
        ],
        [
          40151, // control of the battery by communication: 802 active, 803 inactive
          reg.rw(
            2,
            () => ENUM_NAN,
            (w) => {
              const v = dec.u32(w, HI);
              check(v === 802 || v === 803);
              return () => {
                this.control = v;
                this.setpointAt = site.clock();
              };
            },
          ),
        ],
        [40795, u32(() => this.maxW)], // maximum battery charging power, W
        [40799, u32(() => this.maxW)], // maximum battery discharging power, W
      ],
      { wholeReads: true },
    );
  }

  batteryV(): number {
    return 360 + this.soc * 0.4;
  }

  protected override tick(nowMs: number): void {
    if (this.control === SMA_CONTROL.active && nowMs - this.setpointAt > this.revertS * 1000) this.control = SMA_CONTROL.inactive;
  }

  protected target(): Target {
    if (this.control === SMA_CONTROL.active) return { mode: "forced", w: this.setpointW };
    return { mode: "self-consumption" };
  }
}
