// The physics of the simulated site: one clock, one load, one PV curve, batteries whose
// state of charge integrates their power, relay-switched loads, and the grid connection
// that every meter reads (import positive). Devices only expose registers over this.
import type { Scenario } from "./scenario.js";
import { noise } from "./random.js";

export interface PowerSource {
  readonly name: string;
  /** AC power delivered to the site now, W (negative = consumed, e.g. a charging battery). */
  acPowerW(): number;
  /** Integrate internal state (SoC, energy counters) over dtS seconds at the current power. */
  integrate(dtS: number, nowMs: number): void;
}

export interface SiteLoad {
  readonly name: string;
  loadW(): number;
  /** Optional: integrate internal state (energy counters, a room's temperature) over dtS seconds. */
  integrate?(dtS: number, nowMs: number): void;
}

/**
 * The equinox sun curve: 0 before 06:00 and after 18:00, sin() between, peaking at 12:00 of
 * the local time UTC + offsetH (for a longitude, offsetH = longitude / 15: mean solar time;
 * the equation of time, at most about 16 minutes, and the seasons are left out).
 */
export function daylight(nowMs: number, offsetH: number): number {
  const h = (((nowMs / 3_600_000 + offsetH) % 24) + 24) % 24;
  return h <= 6 || h >= 18 ? 0 : Math.sin((Math.PI * (h - 6)) / 12);
}

export class SiteModel {
  base_load_w: number;
  load_noise_pct: number;
  pv_irradiance: number | undefined;
  readonly tz_offset_h: number;
  readonly longitude_deg: number | undefined;
  readonly voltage_v: number;
  readonly frequency_hz: number;
  readonly seed: number;
  readonly sources: PowerSource[] = [];
  readonly loads: SiteLoad[] = [];
  /** Grid energy counters, Wh, shared by every meter on the site. */
  importWh = 0;
  exportWh = 0;
  private lastMs: number;
  private gridW = 0;

  constructor(
    sc: Scenario["site"],
    seed: number,
    private readonly now: () => number = Date.now,
  ) {
    this.base_load_w = sc.base_load_w;
    this.load_noise_pct = sc.load_noise_pct;
    this.pv_irradiance = sc.pv_irradiance;
    this.tz_offset_h = sc.tz_offset_h;
    this.longitude_deg = sc.longitude_deg;
    this.voltage_v = sc.voltage_v;
    this.frequency_hz = sc.frequency_hz;
    this.seed = seed;
    this.lastMs = now();
  }

  /** Irradiance 0..1: pinned by the scenario, or a daylight curve (06:00-18:00 local solar time). */
  irradiance(nowMs = this.now()): number {
    if (this.pv_irradiance !== undefined) return this.pv_irradiance;
    return daylight(nowMs, this.longitude_deg !== undefined ? this.longitude_deg / 15 : this.tz_offset_h);
  }

  /** Site load without relay loads, with seeded noise (a function of the second). */
  baseLoadW(nowMs = this.now()): number {
    const n = noise(this.seed, 1, Math.floor(nowMs / 1000));
    return Math.max(0, this.base_load_w * (1 + (this.load_noise_pct / 100) * n));
  }

  /** Brings every state up to now. Called before any register is read or written. */
  advance(): void {
    const now = this.now();
    const dtS = (now - this.lastMs) / 1000;
    if (dtS > 0) {
      for (const s of this.sources) s.integrate(dtS, now);
      for (const l of this.loads) l.integrate?.(dtS, now);
      const g = this.gridW;
      if (g > 0) this.importWh += (g * dtS) / 3600;
      else this.exportWh += (-g * dtS) / 3600;
      this.lastMs = now;
    }
    this.gridW = this.computeGridW(now);
  }

  private computeGridW(now: number): number {
    let w = this.baseLoadW(now);
    for (const l of this.loads) w += l.loadW();
    for (const s of this.sources) w -= s.acPowerW();
    return w;
  }

  /** Grid power now, W, import positive. */
  grid(): number {
    this.advance();
    return this.gridW;
  }

  clock(): number {
    return this.now();
  }
}
