// The physics of the simulated site: one clock, one load, one PV curve, batteries whose
// state of charge integrates their power, relay-switched loads, and the grid connection
// that every meter reads (import positive). Devices only expose registers over this.
import type { SiteSpec } from "./site-schema.js";
import { noise } from "./random.js";
import { zoneOffset, type OffsetAt } from "../src/util/wall-time.js";

/**
 * The site's clock, epoch ms: the machine's wall clock, or, with the scenario's
 * `start_time`, that instant at the simulator's start moving on at the machine's pace.
 * A test may hand the simulator a clock of its own instead (startSim's `clock`).
 */
export function scenarioClock(sc: Pick<SiteSpec, "start_time">, wall: () => number = Date.now): () => number {
  if (sc.start_time === undefined) return wall;
  const start = Date.parse(sc.start_time);
  const t0 = wall();
  return () => start + (wall() - t0);
}

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
  /** The site's IANA zone (`timezone`), when the scenario names one. */
  readonly timezone: string | undefined;
  /** The site's UTC offset at an instant, ms: its zone's, else tz_offset_h. */
  readonly offsetAt: OffsetAt;
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
    sc: SiteSpec,
    seed: number,
    private readonly now: () => number = scenarioClock(sc),
  ) {
    this.base_load_w = sc.base_load_w;
    this.load_noise_pct = sc.load_noise_pct;
    this.pv_irradiance = sc.pv_irradiance;
    this.tz_offset_h = sc.tz_offset_h;
    this.timezone = sc.timezone;
    const fixed = sc.tz_offset_h * 3_600_000;
    this.offsetAt = sc.timezone === undefined ? () => fixed : zoneOffset(sc.timezone);
    this.longitude_deg = sc.longitude_deg;
    this.voltage_v = sc.voltage_v;
    this.frequency_hz = sc.frequency_hz;
    this.seed = seed;
    this.lastMs = now();
  }

  /** Irradiance 0..1: pinned by the scenario, or a daylight curve (06:00-18:00 local solar time). */
  irradiance(nowMs = this.now()): number {
    if (this.pv_irradiance !== undefined) return this.pv_irradiance;
    return daylight(nowMs, this.longitude_deg !== undefined ? this.longitude_deg / 15 : this.offsetAt(nowMs) / 3_600_000);
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

  /** The site's local wall time now as minutes after midnight (0..1439), in its zone. */
  localMinutes(nowMs = this.now()): number {
    const local = nowMs + this.offsetAt(nowMs);
    return Math.floor((((local % 86_400_000) + 86_400_000) % 86_400_000) / 60_000);
  }
}
