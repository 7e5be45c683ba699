// A small downsampled history for the status page's 24 h charts: one mean per minute per
// series (device, metric), 1440 minutes in a Float32Array ring, in memory. The sample
// store cannot serve this: it deletes snapshots once the partner accepted them.
// About 5.6 KiB per series (a 5-device site: well under 1 MiB); lost on restart.
import type { Snapshot } from "../telemetry/types.js";

export const HISTORY_MINUTES = 1440;
const MINUTE = 60_000;
/** Bound on the number of series: a misconfigured site cannot grow this without limit. */
const MAX_SERIES = 4000;

class Series {
  readonly ring = new Float32Array(HISTORY_MINUTES).fill(NaN);
  /** The minute (ms / 60000) of the bucket being filled; -1 before the first value. */
  minute = -1;
  sum = 0;
  n = 0;

  add(minute: number, v: number): void {
    if (minute < this.minute) return; // a clock step backwards: keep the newer bucket
    if (minute !== this.minute) {
      if (this.minute >= 0) {
        this.ring[this.minute % HISTORY_MINUTES] = this.sum / this.n;
        // Minutes without a value in between are gaps.
        for (let m = this.minute + 1; m < minute && m <= this.minute + HISTORY_MINUTES; m++) this.ring[m % HISTORY_MINUTES] = NaN;
      }
      this.minute = minute;
      this.sum = 0;
      this.n = 0;
    }
    this.sum += v;
    this.n++;
  }

  /** [minute start ms, mean] for the last 24 h up to `nowMinute`, gaps left out. */
  points(nowMinute: number): Array<[number, number]> {
    const out: Array<[number, number]> = [];
    if (this.minute < 0) return out;
    const from = nowMinute - HISTORY_MINUTES + 1;
    for (let m = Math.max(from, this.minute - HISTORY_MINUTES + 1); m <= Math.min(nowMinute, this.minute); m++) {
      const v = m === this.minute ? this.sum / this.n : (this.ring[m % HISTORY_MINUTES] ?? NaN);
      if (!Number.isNaN(v)) out.push([m * MINUTE, Math.round(v * 1000) / 1000]);
    }
    return out;
  }
}

export class MinuteHistory {
  private readonly series = new Map<string, Series>();

  observe(s: Snapshot): void {
    const minute = Math.floor(s.ts / MINUTE);
    for (const d of s.devices) {
      for (const [metric, v] of Object.entries(d.metrics)) {
        if (!Number.isFinite(v)) continue;
        const key = `${d.device_id}\u0000${metric}`;
        let ser = this.series.get(key);
        if (!ser) {
          if (this.series.size >= MAX_SERIES) continue;
          ser = new Series();
          this.series.set(key, ser);
        }
        ser.add(minute, v);
      }
    }
  }

  points(deviceId: string, metric: string, now = Date.now()): Array<[number, number]> {
    return this.series.get(`${deviceId}\u0000${metric}`)?.points(Math.floor(now / MINUTE)) ?? [];
  }

  get size(): number {
    return this.series.size;
  }
}
