// Delivered power is measured, never assumed (B4): a time-weighted mean of the samples
// taken from the first reading after the first setpoint write (its confirmation read, or a
// poll) until the end. A sample holds until the next one, but never longer than `holdMs`
// (the dispatcher's hold time): a device that stops answering counts as delivering nothing
// for the time it is silent. The state is a handful of numbers, so it is persisted with the
// event and survives a restart.

export interface MeanState {
  /** Start of the measured window (the first sample's time), ms. */
  from: number;
  /** Time and value of the latest sample. */
  at: number;
  value: number;
  /** Integral of value over time up to `at`, value x ms. */
  area: number;
}

export function addSample(s: MeanState | undefined, at: number, value: number, holdMs: number): MeanState {
  if (!s) return { from: at, at, value, area: 0 };
  if (at <= s.at) return s;
  return { from: s.from, at, value, area: s.area + s.value * Math.min(at - s.at, holdMs) };
}

/** The mean over [from, until]; `windowFrom` widens the window to start earlier (silence counts as 0). */
export function meanUntil(s: MeanState | undefined, until: number, holdMs: number, windowFrom?: number): number | undefined {
  if (!s) return undefined;
  const from = windowFrom !== undefined ? Math.min(windowFrom, s.from) : s.from;
  const tail = Math.max(0, Math.min(until - s.at, holdMs));
  const span = Math.max(until, s.at) - from;
  if (span <= 0) return s.value;
  return (s.area + s.value * tail) / span;
}

/**
 * The recent history of one series (a device's power) as one-second buckets, long enough
 * to look back for a quiet minute before an event (B4: up to 15 min). Buckets keep the
 * memory per device fixed (about a thousand numbers) whatever the poll interval.
 */
export class RollingWindow {
  private readonly buckets: Array<{ at: number; sum: number; n: number }> = [];

  constructor(
    private readonly spanMs: number,
    private readonly keepMs: number,
    private readonly bucketMs = 1000,
  ) {}

  add(at: number, value: number): void {
    const start = Math.floor(at / this.bucketMs) * this.bucketMs;
    const last = this.buckets[this.buckets.length - 1];
    if (last && start < last.at) return;
    if (last && start === last.at) {
      last.sum += value;
      last.n++;
    } else this.buckets.push({ at: start, sum: value, n: 1 });
    while (this.buckets.length > 0 && this.buckets[0].at < at - this.keepMs) this.buckets.shift();
  }

  /** Mean of the samples in whole buckets inside [until - span, until), or undefined when there are none. */
  mean(until: number): number | undefined {
    let sum = 0;
    let n = 0;
    for (const b of this.buckets) {
      if (b.at >= until - this.spanMs && b.at + this.bucketMs <= until) {
        sum += b.sum;
        n += b.n;
      }
    }
    return n ? sum / n : undefined;
  }
}
