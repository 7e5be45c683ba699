// SunSpec devices of the simulator: a storage inverter (models 1, 103, 120, 123, 124),
// a PV inverter (1, 103, 120, 123), a wye meter (1, 203), and a device with only the
// common model 1 (it does not say what it is), all at base 40000.
// A few optional points answer "not implemented", as real devices do. The control points
// (InWRte/OutWRte, WMaxLimPct) are scaled by the scenario's control_sf, as on real inverters.
import { DeviceBase, takeSoc, type DeviceView } from "./device.js";
import { SunSpecImage, commonModel, checkRange, type ModelDef, type PointDef } from "./sunspec-image.js";
import type { PowerSource, SiteModel } from "../site-model.js";
import { hashString, noise } from "../random.js";

export const SUNSPEC_BASE = 40000;
const NI = () => null;

export function sf(name: string, value: number | null): PointDef {
  return { name, type: "sunssf", get: () => value };
}

function serialFor(name: string, seed: number, prefix: string, given?: string): string {
  return given ?? `${prefix}${((hashString(name) ^ seed) >>> 0).toString(16).toUpperCase().padStart(8, "0")}`;
}

/** Inverter model 103 (three-phase, integer + scale factors), single-phase devices leave B/C not implemented. */
export function inverter103(d: {
  powerW: () => number;
  energyWh: () => number;
  dcW: () => number | null;
  state: () => number;
  site: SiteModel;
  tempC: () => number;
}): ModelDef {
  const v = () => d.site.voltage_v;
  const amps = () => Math.abs(d.powerW()) / d.site.voltage_v;
  return {
    id: 103,
    length: 50,
    points: [
      { name: "A", type: "uint16", sf: -2, get: amps },
      { name: "AphA", type: "uint16", sf: -2, get: amps },
      { name: "AphB", type: "uint16", sf: -2, get: NI },
      { name: "AphC", type: "uint16", sf: -2, get: NI },
      sf("A_SF", -2),
      { name: "PPVphAB", type: "uint16", get: NI },
      { name: "PPVphBC", type: "uint16", get: NI },
      { name: "PPVphCA", type: "uint16", get: NI },
      { name: "PhVphA", type: "uint16", sf: -1, get: v },
      { name: "PhVphB", type: "uint16", sf: -1, get: NI },
      { name: "PhVphC", type: "uint16", sf: -1, get: NI },
      sf("V_SF", -1),
      { name: "W", type: "int16", sf: 0, get: d.powerW },
      sf("W_SF", 0),
      { name: "Hz", type: "uint16", sf: -2, get: () => d.site.frequency_hz },
      sf("Hz_SF", -2),
      { name: "VA", type: "int16", sf: 0, get: () => Math.abs(d.powerW()) },
      sf("VA_SF", 0),
      { name: "VAr", type: "int16", sf: 0, get: () => 0 },
      sf("VAr_SF", 0),
      { name: "PF", type: "int16", sf: 0, get: () => 100 },
      sf("PF_SF", 0),
      { name: "WH", type: "acc32", sf: 0, get: d.energyWh },
      sf("WH_SF", 0),
      { name: "DCA", type: "uint16", get: NI },
      sf("DCA_SF", null),
      { name: "DCV", type: "uint16", get: NI },
      sf("DCV_SF", null),
      { name: "DCW", type: "int16", sf: 0, get: d.dcW },
      sf("DCW_SF", 0),
      { name: "TmpCab", type: "int16", sf: -1, get: d.tempC },
      { name: "TmpSnk", type: "int16", get: NI },
      { name: "TmpTrns", type: "int16", get: NI },
      { name: "TmpOt", type: "int16", get: NI },
      sf("Tmp_SF", -1),
      { name: "St", type: "enum16", get: d.state },
      { name: "StVnd", type: "enum16", get: NI },
      { name: "Evt1", type: "bitfield32", get: () => 0 },
      { name: "Evt2", type: "bitfield32", get: () => 0 },
      { name: "EvtVnd1", type: "bitfield32", get: NI },
      { name: "EvtVnd2", type: "bitfield32", get: NI },
      { name: "EvtVnd3", type: "bitfield32", get: NI },
      { name: "EvtVnd4", type: "bitfield32", get: NI },
    ],
  };
}

function nameplate120(d: { derTyp: number; wRtg: number; whRtg: number | null; maxCha: number | null; maxDis: number | null }): ModelDef {
  return {
    id: 120,
    length: 26,
    points: [
      { name: "DERTyp", type: "enum16", get: () => d.derTyp },
      { name: "WRtg", type: "uint16", sf: 0, get: () => d.wRtg },
      sf("WRtg_SF", 0),
      { name: "VARtg", type: "uint16", sf: 0, get: () => d.wRtg },
      sf("VARtg_SF", 0),
      { name: "VArRtgQ1", type: "int16", get: NI },
      { name: "VArRtgQ2", type: "int16", get: NI },
      { name: "VArRtgQ3", type: "int16", get: NI },
      { name: "VArRtgQ4", type: "int16", get: NI },
      sf("VArRtg_SF", null),
      { name: "ARtg", type: "uint16", sf: -1, get: () => d.wRtg / 230 },
      sf("ARtg_SF", -1),
      { name: "PFRtgQ1", type: "int16", get: NI },
      { name: "PFRtgQ2", type: "int16", get: NI },
      { name: "PFRtgQ3", type: "int16", get: NI },
      { name: "PFRtgQ4", type: "int16", get: NI },
      sf("PFRtg_SF", null),
      { name: "WHRtg", type: "uint16", sf: 1, get: () => d.whRtg },
      sf("WHRtg_SF", d.whRtg === null ? null : 1),
      { name: "AhrRtg", type: "uint16", get: NI },
      sf("AhrRtg_SF", null),
      { name: "MaxChaRte", type: "uint16", sf: 0, get: () => d.maxCha },
      sf("MaxChaRte_SF", d.maxCha === null ? null : 0),
      { name: "MaxDisChaRte", type: "uint16", sf: 0, get: () => d.maxDis },
      sf("MaxDisChaRte_SF", d.maxDis === null ? null : 0),
      { name: "Pad", type: "pad" },
    ],
  };
}

/**
 * A percent control point scaled by the device's control scale factor: reads give
 * round(pct / 10^sf), writes take a raw value, refuse one outside min..max percent
 * (ILLEGAL_VALUE, as real devices do) and store it as percent.
 */
function scaledPct(
  name: string,
  type: "int16" | "uint16",
  sfExp: number,
  min: number,
  max: number,
  get: () => number,
  set: (pct: number) => void,
): PointDef {
  const rawMin = Math.round(min / 10 ** sfExp);
  const rawMax = Math.round(max / 10 ** sfExp);
  return {
    name,
    type,
    sf: sfExp,
    get,
    set: (raw) => {
      checkRange(raw, rawMin, rawMax);
      set(sfExp < 0 ? raw / 10 ** -sfExp : raw * 10 ** sfExp);
    },
  };
}

/** Immediate controls 123: Conn and the WMaxLimPct power limit (curtailment), with revert timers. */
class Controls123 {
  conn = 1;
  limPct = 100;
  limEna = 0;
  limRvrtS = 0;
  limWrittenAt = 0;
  constructor(
    private readonly now: () => number,
    private readonly controlSf = 0,
  ) {}

  tick(nowMs: number): void {
    if (this.limEna && this.limRvrtS > 0 && nowMs - this.limWrittenAt > this.limRvrtS * 1000) this.limEna = 0;
  }

  model(): ModelDef {
    const rw = (name: string, get: () => number, set: (raw: number) => void, min: number, max: number): PointDef => ({
      name,
      type: "uint16",
      get,
      set: (raw) => {
        checkRange(raw, min, max);
        set(raw);
      },
    });
    const ni = (name: string, type: PointDef["type"] = "uint16"): PointDef => ({ name, type, get: NI });
    return {
      id: 123,
      length: 24,
      points: [
        ni("Conn_WinTms"),
        ni("Conn_RvrtTms"),
        {
          ...rw(
            "Conn",
            () => this.conn,
            (r) => (this.conn = r),
            0,
            1,
          ),
          type: "enum16",
        },
        scaledPct(
          "WMaxLimPct",
          "uint16",
          this.controlSf,
          0,
          100,
          () => this.limPct,
          (pct) => {
            this.limPct = pct;
            this.limWrittenAt = this.now();
          },
        ),
        ni("WMaxLimPct_WinTms"),
        rw(
          "WMaxLimPct_RvrtTms",
          () => this.limRvrtS,
          (r) => (this.limRvrtS = r),
          0,
          0xfffe,
        ),
        ni("WMaxLimPct_RmpTms"),
        {
          ...rw(
            "WMaxLim_Ena",
            () => this.limEna,
            (r) => {
              this.limEna = r;
              this.limWrittenAt = this.now();
            },
            0,
            1,
          ),
          type: "enum16",
        },
        ni("OutPFSet", "int16"),
        ni("OutPFSet_WinTms"),
        ni("OutPFSet_RvrtTms"),
        ni("OutPFSet_RmpTms"),
        ni("OutPFSet_Ena", "enum16"),
        ni("VArWMaxPct", "int16"),
        ni("VArMaxPct", "int16"),
        ni("VArAvalPct", "int16"),
        ni("VArPct_WinTms"),
        ni("VArPct_RvrtTms"),
        ni("VArPct_RmpTms"),
        ni("VArPct_Mod", "enum16"),
        ni("VArPct_Ena", "enum16"),
        sf("WMaxLimPct_SF", this.controlSf),
        sf("OutPFSet_SF", null),
        sf("VArPct_SF", null),
      ],
    };
  }
}

abstract class SunSpecDevice extends DeviceBase {
  protected image!: SunSpecImage;
  constructor(
    name: string,
    unit: number,
    protected readonly site: SiteModel,
  ) {
    super(name, unit);
  }
  override readHolding(address: number, count: number): number[] {
    this.site.advance();
    return this.image.read(address, count);
  }
  override writeHolding(address: number, values: number[]): void {
    this.site.advance();
    this.image.write(address, values);
    this.site.advance();
  }
}

export class StorageInverter extends SunSpecDevice implements PowerSource {
  readonly model = "sunspec-storage";
  soc: number;
  readonly maxW: number;
  readonly capWh: number;
  wChaMax: number;
  ctl = 0; // StorCtl_Mod: bit 0 charge, bit 1 discharge
  inRte = 0; // % of WChaMax
  outRte = 0;
  rvrtS = 0;
  ctlWrittenAt = 0;
  minRsv = 0;
  energyOutWh = 0;
  readonly ctl123: Controls123;

  constructor(
    spec: {
      name: string;
      unit: number;
      max_power_w: number;
      capacity_wh: number;
      soc_pct: number;
      serial?: string;
      control_sf?: number;
      omit_models?: readonly number[];
    },
    site: SiteModel,
  ) {
    super(spec.name, spec.unit, site);
    this.maxW = spec.max_power_w;
    this.capWh = spec.capacity_wh;
    this.soc = spec.soc_pct;
    this.wChaMax = spec.max_power_w;
    const controlSf = spec.control_sf ?? 0;
    this.ctl123 = new Controls123(() => site.clock(), controlSf);
    const sn = serialFor(spec.name, site.seed, "ST", spec.serial);
    const stamp = () => (this.ctlWrittenAt = site.clock());
    const pct = (name: string, get: () => number, set: (pct: number) => void): PointDef =>
      scaledPct(name, "int16", controlSf, -100, 100, get, (v) => {
        set(v);
        stamp();
      });
    const storage124: ModelDef = {
      id: 124,
      length: 24,
      points: [
        {
          name: "WChaMax",
          type: "uint16",
          sf: 0,
          get: () => this.wChaMax,
          set: (r) => {
            checkRange(r, 0, this.maxW);
            this.wChaMax = r;
          },
        },
        { name: "WChaGra", type: "uint16", sf: 0, get: () => 100 },
        { name: "WDisChaGra", type: "uint16", sf: 0, get: () => 100 },
        {
          name: "StorCtl_Mod",
          type: "bitfield16",
          get: () => this.ctl,
          set: (r) => {
            checkRange(r, 0, 3);
            this.ctl = r;
            stamp();
          },
        },
        { name: "VAChaMax", type: "uint16", get: NI },
        {
          name: "MinRsvPct",
          type: "uint16",
          sf: 0,
          get: () => this.minRsv,
          set: (r) => {
            checkRange(r, 0, 100);
            this.minRsv = r;
          },
        },
        { name: "ChaState", type: "uint16", sf: -1, get: () => this.soc },
        { name: "StorAval", type: "uint16", get: NI },
        { name: "InBatV", type: "uint16", sf: -1, get: () => 48 + this.soc * 0.06 },
        { name: "ChaSt", type: "enum16", get: () => this.chaSt() },
        pct(
          "OutWRte",
          () => this.outRte,
          (r) => (this.outRte = r),
        ),
        pct(
          "InWRte",
          () => this.inRte,
          (r) => (this.inRte = r),
        ),
        { name: "InOutWRte_WinTms", type: "uint16", get: NI },
        {
          name: "InOutWRte_RvrtTms",
          type: "uint16",
          get: () => this.rvrtS,
          set: (r) => {
            this.rvrtS = r;
            stamp();
          },
        },
        { name: "InOutWRte_RmpTms", type: "uint16", get: NI },
        { name: "ChaGriSet", type: "enum16", get: () => 1 },
        sf("WChaMax_SF", 0),
        sf("WChaDisChaGra_SF", 0),
        sf("VAChaMax_SF", null),
        sf("MinRsvPct_SF", 0),
        sf("ChaState_SF", -1),
        sf("StorAval_SF", null),
        sf("InBatV_SF", -1),
        sf("InOutWRte_SF", controlSf),
      ],
    };
    this.image = new SunSpecImage(
      SUNSPEC_BASE,
      [
        commonModel("SimEnergy", "SimStore 5", "1.4.2", sn),
        inverter103({
          powerW: () => this.acPowerW(),
          energyWh: () => this.energyOutWh,
          dcW: () => this.acPowerW() * 1.03,
          state: () => (this.acPowerW() === 0 ? 8 : 4),
          site,
          tempC: () => 30 + Math.abs(this.acPowerW()) / 500,
        }),
        nameplate120({ derTyp: 82, wRtg: this.maxW, whRtg: this.capWh, maxCha: this.maxW, maxDis: this.maxW }),
        this.ctl123.model(),
        storage124,
      ].filter((m) => !spec.omit_models?.includes(m.id)),
    );
    site.sources.push(this);
  }

  /** Commanded AC power, W (positive = discharge), before state-of-charge limits. */
  commandedW(): number {
    let w = 0;
    if (this.ctl & 2) w += (this.outRte / 100) * this.wChaMax;
    if (this.ctl & 1) w -= (this.inRte / 100) * this.wChaMax;
    return Math.max(-this.maxW, Math.min(this.maxW, w));
  }

  acPowerW(): number {
    if (!this.ctl123.conn) return 0;
    const w = this.commandedW();
    if (w > 0 && this.soc <= this.minRsv) return 0; // empty: discharges no more
    if (w < 0 && this.soc >= 100) return 0; // full: charges no more
    return w;
  }

  private chaSt(): number {
    const w = this.acPowerW();
    if (w < 0) return 4; // charging
    if (w > 0) return 3; // discharging
    if (this.soc >= 100) return 5;
    if (this.soc <= 0) return 2;
    return 6; // holding
  }

  integrate(dtS: number, nowMs: number): void {
    const w = this.acPowerW();
    this.soc = Math.max(0, Math.min(100, this.soc - ((w * dtS) / 3600 / this.capWh) * 100));
    if (w > 0) this.energyOutWh += (w * dtS) / 3600;
    if (this.rvrtS > 0 && this.ctl !== 0 && nowMs - this.ctlWrittenAt > this.rvrtS * 1000) this.ctl = 0;
    this.ctl123.tick(nowMs);
  }

  view(): DeviceView {
    this.site.advance();
    return {
      power_w: round1(this.acPowerW()),
      setpoint_w: round1(this.commandedW()),
      soc_pct: round3(this.soc),
      connected: this.ctl123.conn === 1,
    };
  }

  override set(values: Record<string, unknown>): void {
    super.set(takeSoc(values, this.site, (soc) => (this.soc = soc)));
  }
}

export class PvInverter extends SunSpecDevice implements PowerSource {
  readonly model = "sunspec-pv";
  readonly maxW: number;
  energyWh = 0;
  readonly ctl123: Controls123;
  private readonly key: number;

  constructor(spec: { name: string; unit: number; max_power_w: number; serial?: string; control_sf?: number }, site: SiteModel) {
    super(spec.name, spec.unit, site);
    this.maxW = spec.max_power_w;
    this.key = hashString(spec.name);
    this.ctl123 = new Controls123(() => site.clock(), spec.control_sf ?? 0);
    this.image = new SunSpecImage(SUNSPEC_BASE, [
      commonModel("SimEnergy", "SimSun 6", "2.0.1", serialFor(spec.name, site.seed, "PV", spec.serial)),
      inverter103({
        powerW: () => this.acPowerW(),
        energyWh: () => this.energyWh,
        dcW: () => this.acPowerW() * 1.04,
        state: () => (this.acPowerW() > 0 ? (this.limitW() < this.availableW() ? 5 : 4) : 2),
        site,
        tempC: () => 25 + this.acPowerW() / 400,
      }),
      nameplate120({ derTyp: 4, wRtg: this.maxW, whRtg: null, maxCha: null, maxDis: null }),
      this.ctl123.model(),
    ]);
    site.sources.push(this);
  }

  availableW(): number {
    const now = this.site.clock();
    const n = noise(this.site.seed, this.key, Math.floor(now / 1000));
    return Math.max(0, Math.min(this.maxW, this.site.irradiance(now) * this.maxW * (1 + 0.01 * n)));
  }

  limitW(): number {
    return this.ctl123.limEna ? (this.ctl123.limPct / 100) * this.maxW : Infinity;
  }

  acPowerW(): number {
    if (!this.ctl123.conn) return 0;
    return Math.min(this.availableW(), this.limitW());
  }

  integrate(dtS: number, nowMs: number): void {
    this.energyWh += (this.acPowerW() * dtS) / 3600;
    this.ctl123.tick(nowMs);
  }

  view(): DeviceView {
    this.site.advance();
    const lim = this.limitW();
    return {
      power_w: round1(this.acPowerW()),
      ...(Number.isFinite(lim) ? { setpoint_w: round1(lim) } : {}),
      available_w: round1(this.availableW()),
      connected: this.ctl123.conn === 1,
    };
  }
}

/** Wye meter model 203 reading the site's grid connection (import positive; sign -1 for a brand that counts export positive). */
export function meter203(site: SiteModel, sign: 1 | -1 = 1): ModelDef {
  const w = () => sign * site.grid();
  const ph = () => (sign * site.grid()) / 3;
  const a = () => Math.abs(site.grid()) / 3 / site.voltage_v;
  const v = () => site.voltage_v;
  const i16 = (name: string, get: () => number | null, s?: number): PointDef => ({ name, type: "int16", sf: s ?? 0, get });
  const acc = (name: string, get: () => number | null): PointDef => ({ name, type: "acc32", sf: 0, get });
  const model203: ModelDef = {
    id: 203,
    length: 105,
    points: [
      i16("A", () => Math.abs(site.grid()) / site.voltage_v, -2),
      i16("AphA", a, -2),
      i16("AphB", a, -2),
      i16("AphC", a, -2),
      sf("A_SF", -2),
      i16("PhV", v, -1),
      i16("PhVphA", v, -1),
      i16("PhVphB", v, -1),
      i16("PhVphC", v, -1),
      i16("PPV", () => v() * Math.sqrt(3), -1),
      i16("PhVphAB", NI),
      i16("PhVphBC", NI),
      i16("PhVphCA", NI),
      sf("V_SF", -1),
      { name: "Hz", type: "int16", sf: -2, get: () => site.frequency_hz },
      sf("Hz_SF", -2),
      i16("W", w),
      i16("WphA", ph),
      i16("WphB", ph),
      i16("WphC", ph),
      sf("W_SF", 0),
      i16("VA", () => Math.abs(site.grid())),
      i16("VAphA", NI),
      i16("VAphB", NI),
      i16("VAphC", NI),
      sf("VA_SF", 0),
      i16("VAR", () => 0),
      i16("VARphA", NI),
      i16("VARphB", NI),
      i16("VARphC", NI),
      sf("VAR_SF", 0),
      i16("PF", () => 100),
      i16("PFphA", NI),
      i16("PFphB", NI),
      i16("PFphC", NI),
      sf("PF_SF", 0),
      acc("TotWhExp", () => site.exportWh),
      acc("TotWhExpPhA", NI),
      acc("TotWhExpPhB", NI),
      acc("TotWhExpPhC", NI),
      acc("TotWhImp", () => site.importWh),
      acc("TotWhImpPhA", NI),
      acc("TotWhImpPhB", NI),
      acc("TotWhImpPhC", NI),
      sf("TotWh_SF", 0),
      ...["TotVAhExp", "TotVAhExpPhA", "TotVAhExpPhB", "TotVAhExpPhC", "TotVAhImp", "TotVAhImpPhA", "TotVAhImpPhB", "TotVAhImpPhC"].map(
        (n) => acc(n, NI),
      ),
      sf("TotVAh_SF", null),
      ...[
        "ImpQ1",
        "ImpQ1PhA",
        "ImpQ1PhB",
        "ImpQ1PhC",
        "ImpQ2",
        "ImpQ2PhA",
        "ImpQ2PhB",
        "ImpQ2PhC",
        "ExpQ3",
        "ExpQ3PhA",
        "ExpQ3PhB",
        "ExpQ3PhC",
        "ExpQ4",
        "ExpQ4PhA",
        "ExpQ4PhB",
        "ExpQ4PhC",
      ].map((n) => acc(`TotVArh${n}`, NI)),
      sf("TotVArh_SF", null),
      { name: "Evt", type: "bitfield32", get: () => 0 },
    ],
  };
  return model203;
}

export class SunSpecMeter extends SunSpecDevice {
  readonly model = "sunspec-meter";

  constructor(spec: { name: string; unit: number; serial?: string }, site: SiteModel) {
    super(spec.name, spec.unit, site);
    this.image = new SunSpecImage(SUNSPEC_BASE, [
      commonModel("SimEnergy", "SimMeter 3", "1.0.0", serialFor(spec.name, site.seed, "MT", spec.serial)),
      meter203(site),
    ]);
  }

  view(): DeviceView {
    return {
      power_w: round1(this.site.grid()),
      energy_import_wh: round1(this.site.importWh),
      energy_export_wh: round1(this.site.exportWh),
    };
  }
}

/** A SunSpec device with only the common model: discovery cannot tell its type. */
export class SunSpecCommonOnly extends SunSpecDevice {
  readonly model = "sunspec-common";

  constructor(spec: { name: string; unit: number; serial?: string }, site: SiteModel) {
    super(spec.name, spec.unit, site);
    this.image = new SunSpecImage(SUNSPEC_BASE, [
      commonModel("SimEnergy", "SimBox 1", "1.0.0", serialFor(spec.name, site.seed, "CB", spec.serial)),
    ]);
  }

  view(): DeviceView {
    return { power_w: 0 };
  }
}

export function round1(x: number): number {
  return Math.round(x * 10) / 10;
}
function round3(x: number): number {
  return Math.round(x * 1000) / 1000;
}
