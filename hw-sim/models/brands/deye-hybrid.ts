// Deye / Sunsynk low-voltage hybrid inverters with their battery: the single-phase
// SUN-xK-SG0xLP1 and the three-phase SUN-xK-SG04LP3 (`variant`).
//
// Documents: Deye "Modbus RTU protocol" for the single-phase hybrids (V1.1) and for the
// three-phase hybrids (V1.1), as circulated by Deye/Sunsynk support. Read from their
// public quotation in kellerza/sunsynk (src/sunsynk/definitions/single_phase.py,
// three_phase_common.py, three_phase_lv.py, identity.py; the library behind the Sunsynk
// Home Assistant add-on), checked against evcc's deye-storage template.
//
// Numbering: the documents number registers from 0 and that number is the PDU address.
// Holding registers only (function 3; writes 6/16). 32-bit values are LOW word first
// (rated power, energy totals); the single-phase total grid import has its low word at
// 78 and its high word at 80, with the grid frequency between them; the three-phase
// grid and inverter totals carry a high word at 690/694 for large values.
// Signs: battery power and current are positive while DISCHARGING; grid power positive
// while importing.
// Control (the documents' system work mode and time-of-use programs): with the timer on
// (single 248 / three 146, bit 0; the three-phase weekday bits are not modelled), a
// program is in force from its start time (HHMM, the site's local time) until the next
// program starts; its capacity (%) is the SOC target. The documents do not say which
// program governs when the start times are out of order; the scenario picks one of two
// readings (`program_times`): `latest-start`, the program whose start is the last at or
// before now; `ascending`, the same among only the programs whose start is later than
// the previous active one's (the first program always counts), as a field report on a
// device written 00:00 / 23:55 in programs 1 and 2 describes. Before the first start of
// the day the last program of the day before is still in force. With grid charge allowed
// in the program (flags bit 0) and grid charging enabled (232 / 130), the battery charges
// from the grid up to that SOC, at the grid charge current (230 / 128, A) or, as the
// other reading has it (`grid_charge_limit: program-power`), at the program's power (W),
// within the max charge current (210 / 108, A). With the program's sell bit (0x40), or the load limit (244 /
// 142) at 0 "allow export" (selling first), the battery discharges at the program's
// power (W) down to that SOC within the max discharge current (211 / 109, A).
// Otherwise, and with the timer off, the inverter is in its own self-consumption.
// Currents above the document's maximum (185 A; 240 A for the three-phase battery
// limits), program values outside their ranges and unknown enum values are refused
// with exception 3. No timeout is documented. A real device starts with the programs at
// 01:00, 05:00, 09:00, 13:00, 17:00, 21:00 and the load limit at 2 (zero export to CT).
// Reserved registers inside the document's blocks read 0; beyond them, exception 2.
// Device type (0): 3 single-phase hybrid (kellerza/sunsynk), 5 LV three-phase hybrid; the
// device table of ha-solarman's deye_sg04lp3 / deye_sg01hp3 definitions also lists 6 (HV
// three-phase hybrid) and 0x0600 / 0x0601 (HV three-phase, 6-15 kW / 20-50 kW), which a
// scenario can set (`device_type`). Rated power (single 16, three 20): u32, low word first,
// 0.1 W, as kellerza/sunsynk's three_phase_common reads it.
// HV three-phase (SG01HP3, `hv`; device type 6 unless set): kellerza/sunsynk's
// three_phase_hv and the SG01HP3 table of the Blauhoff device repository give the battery
// voltage (587) in 0.1 V, the battery power (590), the program powers (154-159) and the
// export limit (143) in 10 W; currents stay in A. The battery is a high-voltage pack
// (kellerza: 160..700 V); the model's runs 300..360 V with the SOC.
import { HybridInverter, type HybridSpec, type Target } from "./hybrid.js";
import { RegisterMap, codec, enc, reg, setting, type RegDef } from "./register-map.js";
import type { SiteModel } from "../../site-model.js";

const LO = "lo-hi" as const;
export type DeyeVariant = "single-phase" | "three-phase";
/** Which program an out-of-order list of start times puts in force (see above). */
export type DeyeProgramTimes = "latest-start" | "ascending";
/** What limits a grid charge: the grid-charge current register, or the program's power. */
export type DeyeGridChargeLimit = "current" | "program-power";

/** Where each variant's document puts the values and settings the model serves. */
export const DEYE_LAYOUT = {
  "single-phase": {
    type: 0x0003,
    rated: 16,
    running: 59,
    batTemp: 182,
    batV: 183,
    soc: 184,
    pv1: 186,
    batW: 190,
    batA: 191,
    maxChg: 210,
    maxDis: 211,
    maxBatA: 185,
    gridChgA: 230,
    gridChgEn: 232,
    priority: 243,
    loadLimit: 244,
    maxSell: 245,
    solarExport: 247,
    useTimer: 248,
    progTime: 250,
    progPower: 256,
    progCap: 268,
    progFlags: 274,
    blocks: [[0, 350]] as Array<[number, number]>,
  },
  "three-phase": {
    type: 0x0005,
    rated: 20,
    running: 500,
    batTemp: 586,
    batV: 587,
    soc: 588,
    pv1: 672,
    batW: 590,
    batA: 591,
    maxChg: 108,
    maxDis: 109,
    maxBatA: 240,
    gridChgA: 128,
    gridChgEn: 130,
    priority: 141,
    loadLimit: 142,
    maxSell: 143,
    solarExport: 145,
    useTimer: 146,
    progTime: 148,
    progPower: 154,
    progCap: 166,
    progFlags: 172,
    blocks: [
      [0, 350],
      [500, 720],
    ] as Array<[number, number]>,
  },
};

interface Program {
  time: number;
  power: number;
  cap: number;
  flags: number;
}

export class DeyeHybrid extends HybridInverter {
  readonly model = "deye-hybrid";
  maxChargeA = 100;
  maxDischargeA = 100;
  gridChargeA = 40;
  gridChargeEnabled = 0;
  priorityLoad = 1;
  loadLimit = 2;
  maxSellW: number;
  solarExport = 1;
  useTimer = 0;
  /** The six time-of-use programs: start HHMM, power (W), capacity (SOC target, %), flags. */
  readonly programs: Program[];
  readonly ratedW: number;
  readonly variant: DeyeVariant;
  /** Register 0: the variant's document value unless the scenario names another listed code. */
  readonly deviceType: number;
  /** The HV three-phase units: 0.1 V battery voltage, 10 W battery and program powers (see above). */
  readonly hv: boolean;
  readonly programTimes: DeyeProgramTimes;
  readonly gridChargeLimit: DeyeGridChargeLimit;
  protected readonly input = null;
  protected readonly holding: RegisterMap;

  constructor(
    spec: HybridSpec & {
      rated_power_w: number;
      variant: DeyeVariant;
      device_type?: number;
      hv?: boolean;
      program_times?: DeyeProgramTimes;
      grid_charge_limit?: DeyeGridChargeLimit;
    },
    site: SiteModel,
  ) {
    super(spec, site, "22", 8);
    this.ratedW = spec.rated_power_w;
    this.variant = spec.variant;
    this.hv = spec.variant === "three-phase" && spec.hv === true;
    this.deviceType = spec.device_type ?? (this.hv ? 0x0006 : DEYE_LAYOUT[spec.variant].type);
    this.programTimes = spec.program_times ?? "latest-start";
    this.gridChargeLimit = spec.grid_charge_limit ?? "current";
    this.maxSellW = spec.rated_power_w;
    this.programs = [100, 500, 900, 1300, 1700, 2100].map((time) => ({ time, power: spec.rated_power_w, cap: 20, flags: 0 }));
    const L = DEYE_LAYOUT[spec.variant];
    this.holding = new RegisterMap([...this.identity(L), ...this.measurements(L), ...this.settings(L)], { blocks: L.blocks });
  }

  private readonly rw = setting(codec.u16);

  private identity(L: (typeof DEYE_LAYOUT)[DeyeVariant]): Array<[number, RegDef]> {
    return [
      [0, reg.fixed([this.deviceType])], // device type: 3 single-phase hybrid, 5 LV three-phase hybrid (see above)
      [1, reg.fixed([0x0001])], // Modbus address (as the document lists it)
      [2, reg.fixed([0x0102])], // protocol version 1.2
      [3, reg.ro(5, () => enc.str(this.serial, 5))], // serial number, 10 ASCII characters
      [L.rated, reg.ro(2, () => enc.u32(this.ratedW * 10, LO))], // rated power, 0.1 W
      [L.running, reg.fixed([2])], // running state: 2 normal
    ];
  }

  private measurements(L: (typeof DEYE_LAYOUT)[DeyeVariant]): Array<[number, RegDef]> {
    const site = this.site;
    const bat = () => this.batteryW();
    const common: Array<[number, RegDef]> = [
      [L.batTemp, reg.ro(1, () => enc.s16(1250))], // battery temperature, 0.1 degC with +100 offset
      [L.batV, reg.ro(1, () => enc.u16(this.batteryV() * (this.hv ? 10 : 100)))], // battery voltage, 0.01 V (HV: 0.1 V)
      [L.soc, reg.ro(1, () => enc.u16(this.soc))], // battery SOC, %
      [L.pv1, reg.ro(1, () => enc.u16(this.pvW()))], // PV1 power, W
      [L.batW, reg.ro(1, () => enc.s16(bat() / this.powerUnit))], // battery power, W (HV: 10 W; + = discharging)
      [L.batA, reg.ro(1, () => enc.s16((bat() / this.batteryV()) * 100))], // battery current, 0.01 A (+ = discharging)
    ];
    const hi = (w: number) => [w < 0 ? 0xffff : 0]; // the high word of a signed 16-bit total
    if (this.variant === "single-phase") {
      return [
        ...common,
        [72, reg.ro(2, () => enc.u32(this.chargedWh / 100, LO))], // total battery charge, 0.1 kWh
        [74, reg.ro(2, () => enc.u32(this.dischargedWh / 100, LO))], // total battery discharge, 0.1 kWh
        [78, reg.ro(1, () => enc.u32(site.importWh / 100, LO).slice(0, 1))], // total grid import, 0.1 kWh: low word
        [79, reg.ro(1, () => enc.u16(site.frequency_hz * 100))], // grid frequency, 0.01 Hz
        [80, reg.ro(1, () => enc.u32(site.importWh / 100, LO).slice(1, 2))], // total grid import: high word
        [81, reg.ro(2, () => enc.u32(site.exportWh / 100, LO))], // total grid export, 0.1 kWh
        [96, reg.ro(2, () => enc.u32(this.pvWh / 100, LO))], // total PV energy, 0.1 kWh
        [169, reg.ro(1, () => enc.s16(site.grid()))], // grid power, W (+ = import)
        [175, reg.ro(1, () => enc.s16(this.acPowerW()))], // inverter output power, W
        [178, reg.ro(1, () => enc.s16(site.baseLoadW()))], // load power, W
      ];
    }
    return [
      ...common,
      [516, reg.ro(2, () => enc.u32(this.chargedWh / 100, LO))], // total battery charge, 0.1 kWh
      [518, reg.ro(2, () => enc.u32(this.dischargedWh / 100, LO))], // total battery discharge, 0.1 kWh
      [522, reg.ro(2, () => enc.u32(site.importWh / 100, LO))], // total grid import, 0.1 kWh
      [524, reg.ro(2, () => enc.u32(site.exportWh / 100, LO))], // total grid export, 0.1 kWh
      [534, reg.ro(2, () => enc.u32(this.pvWh / 100, LO))], // total PV energy, 0.1 kWh
      [598, reg.ro(1, () => enc.u16(site.voltage_v * 10))], // grid L1 voltage, 0.1 V
      [599, reg.ro(1, () => enc.u16(site.voltage_v * 10))], // grid L2 voltage
      [600, reg.ro(1, () => enc.u16(site.voltage_v * 10))], // grid L3 voltage
      [609, reg.ro(1, () => enc.u16(site.frequency_hz * 100))], // grid frequency, 0.01 Hz
      [622, reg.ro(1, () => enc.s16(site.grid() / 3))], // grid L1 power, W
      [623, reg.ro(1, () => enc.s16(site.grid() / 3))], // grid L2 power, W
      [624, reg.ro(1, () => enc.s16(site.grid() / 3))], // grid L3 power, W
      [625, reg.ro(1, () => enc.s16(site.grid()))], // grid power, W (+ = import)
      [633, reg.ro(1, () => enc.s16(this.acPowerW() / 3))], // inverter L1 power, W
      [634, reg.ro(1, () => enc.s16(this.acPowerW() / 3))], // inverter L2 power, W
      [635, reg.ro(1, () => enc.s16(this.acPowerW() / 3))], // inverter L3 power, W
      [636, reg.ro(1, () => enc.s16(this.acPowerW()))], // inverter power, W
      [690, reg.ro(1, () => hi(site.grid()))], // grid power: high word
      [694, reg.ro(1, () => hi(this.acPowerW()))], // inverter power: high word
    ];
  }

  private settings(L: (typeof DEYE_LAYOUT)[DeyeVariant]): Array<[number, RegDef]> {
    const rw = this.rw.bind(this);
    const validTime = (v: number) => Math.floor(v / 100) <= 23 && v % 100 <= 59;
    const out: Array<[number, RegDef]> = [
      [
        L.maxChg, // battery max charge current, A
        rw(
          () => this.maxChargeA,
          (v) => (this.maxChargeA = v),
          (v) => v <= L.maxBatA,
        ),
      ],
      [
        L.maxDis, // battery max discharge current, A
        rw(
          () => this.maxDischargeA,
          (v) => (this.maxDischargeA = v),
          (v) => v <= L.maxBatA,
        ),
      ],
      [
        L.gridChgA, // grid charge battery current, A
        rw(
          () => this.gridChargeA,
          (v) => (this.gridChargeA = v),
          (v) => v <= 185,
        ),
      ],
      [
        L.gridChgEn, // grid charge enabled
        rw(
          () => this.gridChargeEnabled,
          (v) => (this.gridChargeEnabled = v),
          (v) => v <= 1,
        ),
      ],
      [
        L.priority, // priority: 0 battery, 1 load
        rw(
          () => this.priorityLoad,
          (v) => (this.priorityLoad = v),
          (v) => v <= 1,
        ),
      ],
      [
        L.loadLimit, // load limit: 0 allow export, 1 essentials, 2 zero export
        rw(
          () => this.loadLimit,
          (v) => (this.loadLimit = v),
          (v) => v <= 2,
        ),
      ],
      [
        L.maxSell, // max sell / export limit power, W (HV: 10 W)
        rw(
          () => this.maxSellW / this.powerUnit,
          (v) => (this.maxSellW = v * this.powerUnit),
          (v) => v * this.powerUnit <= this.ratedW,
        ),
      ],
      [
        L.solarExport, // solar export
        rw(
          () => this.solarExport,
          (v) => (this.solarExport = v),
          (v) => v <= 1,
        ),
      ],
      [
        L.useTimer, // use timer (bit 0; three-phase: weekday bits 1..7)
        rw(
          () => this.useTimer,
          (v) => (this.useTimer = v),
          (v) => v <= 0xff,
        ),
      ],
    ];
    for (const [i, prog] of this.programs.entries()) {
      out.push(
        [
          L.progTime + i, // program start time, HHMM
          rw(
            () => prog.time,
            (v) => (prog.time = v),
            validTime,
          ),
        ],
        [
          L.progPower + i, // program power, W (HV: 10 W)
          rw(
            () => prog.power / this.powerUnit,
            (v) => (prog.power = v * this.powerUnit),
            (v) => v * this.powerUnit <= this.ratedW,
          ),
        ],
        [
          L.progCap + i, // program capacity (SOC target), %
          rw(
            () => prog.cap,
            (v) => (prog.cap = v),
            (v) => v <= 100,
          ),
        ],
        [
          L.progFlags + i, // program flags: bit 0 grid charge, bits 2..4 mode, 0x40 sell
          rw(
            () => prog.flags,
            (v) => (prog.flags = v),
            (v) => v <= 0x7f,
          ),
        ],
      );
    }
    return out;
  }

  /** W per count of the battery and program power registers: 10 on the HV models. */
  get powerUnit(): number {
    return this.hv ? 10 : 1;
  }

  batteryV(): number {
    return this.hv ? 300 + this.soc * 0.6 : 48 + this.soc * 0.06;
  }

  /** The programs whose start times count under the scenario's reading, in their order. */
  private activePrograms(): Program[] {
    if (this.programTimes === "latest-start") return this.programs;
    const out: Program[] = [];
    for (const p of this.programs) if (out.length === 0 || p.time > out[out.length - 1]!.time) out.push(p);
    return out;
  }

  /** The program in force at the site's local time: the last active one whose start is at or before now (wrapping). */
  activeProgram(): Program {
    const m = this.site.localMinutes();
    const hhmm = Math.floor(m / 60) * 100 + (m % 60);
    const active = this.activePrograms();
    const started = active.filter((p) => p.time <= hhmm);
    // Before the day's first start, yesterday's last program is still in force; of equal starts the later one.
    return (started.length ? started : active).reduce((a, b) => (b.time >= a.time ? b : a));
  }

  protected target(): Target {
    const v = this.batteryV();
    const maxCharge = Math.min(this.maxW, this.maxChargeA * v);
    const maxDischarge = Math.min(this.maxW, this.maxDischargeA * v);
    if (!(this.useTimer & 1)) return { mode: "self-consumption", maxChargeW: maxCharge, maxDischargeW: maxDischarge };
    const { cap, flags, power } = this.activeProgram();
    if (flags & 1 && this.gridChargeEnabled & 1 && this.soc < cap) {
      const limit = this.gridChargeLimit === "current" ? this.gridChargeA * v : power;
      return { mode: "forced", w: -Math.min(maxCharge, limit), maxSoc: cap };
    }
    if ((flags & 0x40 || this.loadLimit === 0) && this.soc > cap) {
      return { mode: "forced", w: Math.min(maxDischarge, power), minSoc: cap };
    }
    return { mode: "self-consumption", minSoc: cap, maxChargeW: maxCharge, maxDischargeW: maxDischarge };
  }
}
