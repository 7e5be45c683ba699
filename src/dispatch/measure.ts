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

/** A rolling window of the latest samples of one series (the grid meter's baseline). */
export class RollingWindow {
  private readonly samples: Array<{ at: number; value: number }> = [];

  constructor(
    private readonly spanMs: number,
    private readonly maxSamples = 600,
  ) {}

  add(at: number, value: number): void {
    const last = this.samples[this.samples.length - 1];
    if (last && at <= last.at) return;
    this.samples.push({ at, value });
    while (this.samples.length > this.maxSamples || (this.samples.length > 0 && this.samples[0].at < at - this.spanMs))
      this.samples.shift();
  }

  /** Mean of the samples in [until - span, until), or undefined when there are none. */
  mean(until: number): number | undefined {
    let sum = 0;
    let n = 0;
    for (const s of this.samples) {
      if (s.at >= until - this.spanMs && s.at < until) {
        sum += s.value;
        n++;
      }
    }
    return n ? sum / n : undefined;
  }
}
