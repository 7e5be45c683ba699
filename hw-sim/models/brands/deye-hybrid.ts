// Deye / Sunsynk single-phase low-voltage hybrid inverter (SUN-xK-SG0xLP1) with its battery.
//
// Document: Deye "Modbus RTU protocol for hybrid inverters" (SUN-5/6/8/10/12K-SG0xLP1,
// V1.1 as circulated by Deye/Sunsynk support). Read from its public quotation in
// kellerza/sunsynk (src/sunsynk/definitions/single_phase.py and identity.py), the
// library behind the Sunsynk Home Assistant add-on.
//
// Numbering: the document numbers registers from 0 and that number is the PDU address.
// Holding registers only (function 3; writes 6/16). 32-bit values are LOW word first
// (rated power 16/17, energy totals 72/73, 74/75, 81/82; the total grid import has its
// low word at 78 and its high word at 80, with the grid frequency between them).
// Signs: battery power 190 and current 191 are positive while DISCHARGING; grid power
// 169 positive while importing.
// Control (the document's "system work mode" and time-of-use program): with the timer
// on (248 bit 0), the program whose start time (250..255, HHMM) is the last one at or
// before the local time is active; its capacity (268..273, %) is the SOC target. With
// grid charge allowed in the program (274..279 bit 0) and grid charging enabled (232 bit
// 0), the battery charges from the grid up to that SOC at the grid charge current (230,
// A) within the battery's max charge current (210, A). With the program's sell bit
// (0x40) the battery discharges at the program's power (256..261, W) down to that SOC
// within the max discharge current (211, A). Otherwise, and with the timer off, the
// inverter is in its own self-consumption. Currents above 185 A, program values outside
// their ranges and unknown enum values are refused with exception 3. The document has no
// timeout. A real device starts with the programs at 01:00, 05:00, 09:00, 13:00, 17:00, 21:00.
import { HybridInverter, type HybridSpec, type Target } from "./hybrid.js";
import { RegisterMap, check, enc, reg } from "./register-map.js";
import type { SiteModel } from "../../site-model.js";

const LO = "lo-hi" as const;
const MAX_A = 185;

export class DeyeHybrid extends HybridInverter {
  readonly model = "deye-hybrid";
  maxChargeA = 100;
  maxDischargeA = 100;
  gridChargeA = 40;
  gridChargeEnabled = 0;
  priorityLoad = 1;
  loadLimit = 0;
  maxSellW: number;
  solarExport = 1;
  useTimer = 0;
  readonly progTime = [100, 500, 900, 1300, 1700, 2100];
  readonly progPower: number[];
  readonly progCap = [20, 20, 20, 20, 20, 20];
  readonly progFlags = [0, 0, 0, 0, 0, 0];
  readonly ratedW: number;
  protected readonly input = null;
  protected readonly holding: RegisterMap;

  constructor(spec: HybridSpec & { rated_power_w: number }, site: SiteModel) {
    super(spec, site, "22", 8);
    this.ratedW = spec.rated_power_w;
    this.maxSellW = spec.rated_power_w;
    this.progPower = new Array<number>(6).fill(spec.rated_power_w);
    const bat = () => this.batteryW();
    const rw = (get: () => number, set: (v: number) => void, ok: (v: number) => boolean) =>
      reg.rw(
        1,
        () => enc.u16(get()),
        ([v]) => {
          check(ok(v));
          return () => set(v);
        },
      );
    const validTime = (v: number) => Math.floor(v / 100) <= 23 && v % 100 <= 59;
    const progs: Array<[number, ReturnType<typeof reg.rw>]> = [];
    for (let i = 0; i < 6; i++) {
      progs.push([
        250 + i, // prog time, HHMM
        rw(
          () => this.progTime[i],
          (v) => (this.progTime[i] = v),
          validTime,
        ),
      ]);
      progs.push([
        256 + i, // prog power, W
        rw(
          () => this.progPower[i],
          (v) => (this.progPower[i] = v),
          (v) => v <= this.ratedW,
        ),
      ]);
      progs.push([
        268 + i, // prog capacity, %
        rw(
          () => this.progCap[i],
          (v) => (this.progCap[i] = v),
          (v) => v <= 100,
        ),
      ]);
      progs.push([
        274 + i, // prog charge/mode/sell flags
        rw(
          () => this.progFlags[i],
          (v) => (this.progFlags[i] = v),
          (v) => v <= 0x7f,
        ),
      ]);
    }
    this.holding = new RegisterMap([
      [0, reg.fixed([0x0003])], // device type: 3 single-phase hybrid
      [1, reg.fixed([0x0001])], // Modbus address (as the document lists it)
      [2, reg.fixed([0x0102])], // protocol version 1.2
      [3, reg.ro(5, () => enc.str(this.serial, 5))], // serial number, 10 ASCII characters
      [16, reg.ro(2, () => enc.u32(this.ratedW * 10, LO))], // rated power, 0.1 W
      [59, reg.fixed([2])], // running state: 2 normal
      [72, reg.ro(2, () => enc.u32(this.chargedWh / 100, LO))], // total battery charge, 0.1 kWh
      [74, reg.ro(2, () => enc.u32(this.dischargedWh / 100, LO))], // total battery discharge, 0.1 kWh
      [76, reg.fixed([0])], // day grid import, 0.1 kWh
      [77, reg.fixed([0])], // day grid export, 0.1 kWh
      [78, reg.ro(1, () => [enc.u32(site.importWh / 100, LO)[0]])], // total grid import, 0.1 kWh: low word
      [79, reg.ro(1, () => enc.u16(site.frequency_hz * 100))], // grid frequency, 0.01 Hz
      [80, reg.ro(1, () => [enc.u32(site.importWh / 100, LO)[1]])], // total grid import: high word
      [81, reg.ro(2, () => enc.u32(site.exportWh / 100, LO))], // total grid export, 0.1 kWh
      [96, reg.ro(2, () => enc.u32(this.pvWh / 100, LO))], // total PV energy, 0.1 kWh
      [169, reg.ro(1, () => enc.s16(site.grid()))], // grid power, W (+ = import)
      [175, reg.ro(1, () => enc.s16(this.acPowerW()))], // inverter output power, W
      [178, reg.ro(1, () => enc.s16(site.baseLoadW()))], // load power, W
      [182, reg.ro(1, () => enc.s16(1250))], // battery temperature, 0.1 degC with +100 offset
      [183, reg.ro(1, () => enc.u16(this.batteryV() * 100))], // battery voltage, 0.01 V
      [184, reg.ro(1, () => enc.u16(this.soc))], // battery SOC, %
      [186, reg.ro(1, () => enc.u16(this.pvW()))], // PV1 power, W
      [190, reg.ro(1, () => enc.s16(bat()))], // battery power, W (+ = discharging)
      [191, reg.ro(1, () => enc.s16((bat() / this.batteryV()) * 100))], // battery current, 0.01 A (+ = discharging)
      [
        210, // battery max charge current, A
        rw(
          () => this.maxChargeA,
          (v) => (this.maxChargeA = v),
          (v) => v <= MAX_A,
        ),
      ],
      [
        211, // battery max discharge current, A
        rw(
          () => this.maxDischargeA,
          (v) => (this.maxDischargeA = v),
          (v) => v <= MAX_A,
        ),
      ],
      [
        230, // grid charge battery current, A
        rw(
          () => this.gridChargeA,
          (v) => (this.gridChargeA = v),
          (v) => v <= MAX_A,
        ),
      ],
      [
        232, // grid charge enabled
        rw(
          () => this.gridChargeEnabled,
          (v) => (this.gridChargeEnabled = v),
          (v) => v <= 1,
        ),
      ],
      [
        243, // priority: 0 battery, 1 load
        rw(
          () => this.priorityLoad,
          (v) => (this.priorityLoad = v),
          (v) => v <= 1,
        ),
      ],
      [
        244, // load limit: 0 allow export, 1 essentials, 2 zero export
        rw(
          () => this.loadLimit,
          (v) => (this.loadLimit = v),
          (v) => v <= 2,
        ),
      ],
      [
        245, // max sell power, W
        rw(
          () => this.maxSellW,
          (v) => (this.maxSellW = v),
          (v) => v <= this.ratedW,
        ),
      ],
      [
        247, // solar export
        rw(
          () => this.solarExport,
          (v) => (this.solarExport = v),
          (v) => v <= 1,
        ),
      ],
      [
        248, // use timer
        rw(
          () => this.useTimer,
          (v) => (this.useTimer = v),
          (v) => v <= 1,
        ),
      ],
      ...progs,
    ]);
  }

  batteryV(): number {
    return 48 + this.soc * 0.06;
  }

  /** The program in force at the site's local time: the last whose start is at or before now (wrapping). */
  activeProgram(): number {
    const ms = this.site.clock() + this.site.tz_offset_h * 3_600_000;
    const d = new Date(ms);
    const hhmm = d.getUTCHours() * 100 + d.getUTCMinutes();
    let best = -1;
    for (let i = 0; i < 6; i++) if (this.progTime[i] <= hhmm && (best < 0 || this.progTime[i] >= this.progTime[best])) best = i;
    if (best >= 0) return best;
    let last = 0;
    for (let i = 1; i < 6; i++) if (this.progTime[i] >= this.progTime[last]) last = i;
    return last;
  }

  protected target(): Target {
    const v = this.batteryV();
    const maxCharge = Math.min(this.maxW, this.maxChargeA * v);
    const maxDischarge = Math.min(this.maxW, this.maxDischargeA * v);
    if (!(this.useTimer & 1)) return { mode: "self-consumption", maxChargeW: maxCharge, maxDischargeW: maxDischarge };
    const p = this.activeProgram();
    const cap = this.progCap[p];
    const flags = this.progFlags[p];
    if (flags & 1 && this.gridChargeEnabled & 1 && this.soc < cap) {
      return { mode: "forced", w: -Math.min(maxCharge, this.gridChargeA * v), maxSoc: cap };
    }
    if (flags & 0x40 && this.soc > cap) return { mode: "forced", w: Math.min(maxDischarge, this.progPower[p]), minSoc: cap };
    return { mode: "self-consumption", minSoc: cap, maxChargeW: maxCharge, maxDischargeW: maxDischarge };
  }
}
