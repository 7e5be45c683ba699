// The physics every brand's hybrid inverter shares: a PV array on the site's sun, a
// battery whose state of charge integrates its power, and an AC output that is their
// sum. What differs per brand is how its registers choose the battery's target (the
// brand's own modes and commands), which each brand model supplies as `target()`.
import { takeSoc, type DeviceView } from "../device.js";
import { TableDevice } from "./table-device.js";
import type { PowerSource, SiteModel } from "../../site-model.js";
import type { RegisterMap } from "./register-map.js";
import { hashString } from "../../random.js";
import { round1 } from "../sunspec-devices.js";

export interface HybridSpec {
  name: string;
  unit: number;
  /** Battery charge/discharge power limit, W. */
  max_power_w: number;
  capacity_wh: number;
  soc_pct: number;
  /** The PV array on the hybrid's own MPPT inputs, W at full sun. */
  pv_max_w: number;
  /** The share of the site's base load this inverter covers in its own self-consumption mode. */
  self_use_load_pct: number;
  serial?: string;
  /** Requests within this long of a client's connect go unanswered, ms. */
  connect_delay_ms?: number;
}

/** What a brand asks of its battery now: its own mode, and for a forced mode the power. */
export type Target =
  /** `w`: the brand's own loop chose the power (e.g. to hold a grid setpoint); absent = cover the load share. */
  | { mode: "self-consumption"; minSoc?: number; maxChargeW?: number; maxDischargeW?: number; w?: number }
  | { mode: "forced"; w: number; minSoc?: number; maxSoc?: number }
  | { mode: "idle" };

export abstract class HybridInverter extends TableDevice implements PowerSource {
  soc: number;
  readonly maxW: number;
  readonly capWh: number;
  readonly pvMaxW: number;
  readonly serial: string;
  readonly connectDelayMs: number;
  chargedWh = 0;
  dischargedWh = 0;
  pvWh = 0;
  acOutWh = 0;
  protected abstract readonly holding: RegisterMap | null;
  protected abstract readonly input: RegisterMap | null;

  constructor(
    spec: HybridSpec,
    protected readonly site: SiteModel,
    serialPrefix: string,
    serialDigits = 8,
  ) {
    super(spec.name, spec.unit);
    this.soc = spec.soc_pct;
    this.maxW = spec.max_power_w;
    this.capWh = spec.capacity_wh;
    this.pvMaxW = spec.pv_max_w;
    this.selfUsePct = spec.self_use_load_pct;
    this.connectDelayMs = spec.connect_delay_ms ?? 0;
    const n = ((hashString(spec.name) ^ site.seed) >>> 0) % 10 ** Math.min(serialDigits, 9);
    this.serial = spec.serial ?? `${serialPrefix}${String(n).padStart(serialDigits, "0")}`;
    site.sources.push(this);
  }

  private readonly selfUsePct: number;

  /** The part of the site's base load this inverter's own self-consumption covers, W. */
  protected loadShareW(): number {
    return (this.site.baseLoadW() * this.selfUsePct) / 100;
  }

  /** The brand's choice of battery behaviour from its registers. */
  protected abstract target(): Target;
  /** Revert timers and the like, at every step of the site clock. */
  protected tick(_nowMs: number): void {}

  pvW(): number {
    return this.site.irradiance() * this.pvMaxW;
  }

  /** Battery power, W, positive = discharging, within the power limit and the state of charge. */
  batteryW(): number {
    const t = this.target();
    let w: number;
    let floor = 0;
    let ceil = 100;
    if (t.mode === "idle") return 0;
    if (t.mode === "forced") {
      w = t.w;
      floor = t.minSoc ?? 0;
      ceil = t.maxSoc ?? 100;
    } else {
      w = t.w ?? this.loadShareW() - this.pvW();
      w = Math.max(-(t.maxChargeW ?? this.maxW), Math.min(t.maxDischargeW ?? this.maxW, w));
      floor = t.minSoc ?? 0;
    }
    w = Math.max(-this.maxW, Math.min(this.maxW, w));
    if (w > 0 && this.soc <= floor) return 0;
    if (w < 0 && this.soc >= ceil) return 0;
    return w;
  }

  /** Commanded battery power before the state-of-charge limits. */
  commandedW(): number | undefined {
    const t = this.target();
    return t.mode === "forced" ? t.w : t.mode === "idle" ? 0 : undefined;
  }

  acPowerW(): number {
    return this.pvW() + this.batteryW();
  }

  integrate(dtS: number, nowMs: number): void {
    const b = this.batteryW();
    this.soc = Math.max(0, Math.min(100, this.soc - ((b * dtS) / 3600 / this.capWh) * 100));
    if (b < 0) this.chargedWh += (-b * dtS) / 3600;
    else this.dischargedWh += (b * dtS) / 3600;
    this.pvWh += (this.pvW() * dtS) / 3600;
    const ac = this.acPowerW();
    if (ac > 0) this.acOutWh += (ac * dtS) / 3600;
    this.tick(nowMs);
  }

  protected tableOf(t: "holding" | "input"): RegisterMap | null {
    return t === "holding" ? this.holding : this.input;
  }

  /** The brand's mode in words, for /state and the tests. */
  modeName(): string {
    const t = this.target();
    if (t.mode !== "forced") return t.mode;
    return t.w < 0 ? "forced-charge" : t.w > 0 ? "forced-discharge" : "forced-idle";
  }

  view(): DeviceView {
    this.site.advance();
    const c = this.commandedW();
    return {
      power_w: round1(this.batteryW()),
      ...(c === undefined ? {} : { setpoint_w: round1(c) }),
      soc_pct: Math.round(this.soc * 1000) / 1000,
      mode: this.modeName(),
      ac_power_w: round1(this.acPowerW()),
      pv_w: round1(this.pvW()),
      serial: this.serial,
    };
  }

  override set(values: Record<string, unknown>): void {
    super.set(takeSoc(values, this.site, (soc) => (this.soc = soc)));
  }
}

/** The power a meter of the site reads: the grid connection (import positive) or the site's load. */
export function meteredW(site: SiteModel, reads: "grid" | "load"): number {
  if (reads === "grid") return site.grid();
  site.advance();
  return siteLoadW(site);
}

/** The site's load now without advancing the clock (safe inside an integration step). */
export function siteLoadW(site: SiteModel): number {
  return site.baseLoadW() + site.loads.reduce((s, l) => s + l.loadW(), 0);
}

/**
 * The import/export counters of a meter: the site's grid counters for a grid meter,
 * its own integration of the load for a load meter.
 */
export class MeterCounters {
  private loadImportWh = 0;
  constructor(
    private readonly site: SiteModel,
    private readonly reads: "grid" | "load",
    name: string,
  ) {
    if (reads === "load")
      site.loads.push({
        name: `${name}-counter`,
        loadW: () => 0,
        integrate: (dtS) => (this.loadImportWh += (siteLoadW(site) * dtS) / 3600),
      });
  }
  get importWh(): number {
    return this.reads === "grid" ? this.site.importWh : this.loadImportWh;
  }
  get exportWh(): number {
    return this.reads === "grid" ? this.site.exportWh : 0;
  }
}
