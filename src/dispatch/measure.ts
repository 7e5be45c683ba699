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
  /** When the segment up to `at` was a restart gap: the rate it was credited at (a read-back after the event's end counts up to the end only). */
  gap_rate?: number;
}

/**
 * One more sample. `resumedAt`: when the gateway came back after a restart (B4 restart
 * gap): the first sample after it stands for the whole gap since the last one before it,
 * so a device that held its setpoint while the gateway was down delivered.
 */
export function addSample(s: MeanState | undefined, at: number, value: number, holdMs: number, resumedAt?: number): MeanState {
  if (!s) return { from: at, at, value, area: 0 };
  if (at < s.at) return s;
  // A second reading at the same instant (several setpoint writes and their confirmation
  // reads in one tick) is the later state: the earlier one held for no time at all.
  if (at === s.at) return { ...s, value };
  if (resumedAt !== undefined && s.at < resumedAt && at >= resumedAt)
    return { from: s.from, at, value, area: s.area + held(s.value, value) * (at - s.at), gap_rate: held(s.value, value) };
  return { from: s.from, at, value, area: s.area + s.value * Math.min(at - s.at, holdMs) };
}

/**
 * What a device held through a restart gap: what it reads back once the gateway is up again,
 * but no more than it delivered before the gap (a device not yet following its setpoint when
 * the gateway went down cannot have held it; the reading after the restart follows a new write).
 */
function held(before: number, after: number): number {
  if (before === 0 || Math.sign(before) !== Math.sign(after)) return 0;
  return Math.sign(after) * Math.min(Math.abs(before), Math.abs(after));
}

/** The mean over [from, until]; `windowFrom` widens the window to start earlier (silence counts as 0). */
export function meanUntil(s: MeanState | undefined, until: number, holdMs: number, windowFrom?: number): number | undefined {
  if (!s) return undefined;
  const from = windowFrom !== undefined ? Math.min(windowFrom, s.from) : s.from;
  if (s.gap_rate !== undefined && until < s.at) return until > from ? (s.area - s.gap_rate * (s.at - until)) / (until - from) : s.value;
  const tail = Math.max(0, Math.min(until - s.at, holdMs));
  const span = Math.max(until, s.at) - from;
  if (span <= 0) return s.value;
  return (s.area + s.value * tail) / span;
}

/**
 * The recent history of one series (a device's power) as one-second buckets in a ring,
 * long enough to look back for a quiet minute before an event (B4: up to 15 min). Typed
 * arrays keep it at 18 bytes a second per device (17 KB for 16 min), whatever the
 * poll interval: less than the 600 sample objects a minute of 100 ms polls used to hold.
 */
export class RollingWindow {
  private readonly slot: Float64Array;
  private readonly sum: Float64Array;
  private readonly n: Uint16Array;
  private last = -1;

  constructor(
    private readonly spanMs: number,
    keepMs: number,
    private readonly bucketMs = 1000,
  ) {
    const size = Math.ceil(keepMs / bucketMs) + 1;
    this.slot = new Float64Array(size).fill(-1);
    this.sum = new Float64Array(size);
    this.n = new Uint16Array(size);
  }

  add(at: number, value: number): void {
    const b = Math.floor(at / this.bucketMs);
    if (b < this.last) return;
    this.last = b;
    const i = b % this.slot.length;
    if (this.slot[i] !== b) {
      this.slot[i] = b;
      this.sum[i] = 0;
      this.n[i] = 0;
    }
    const n = this.n[i] ?? 0;
    if (n === 0xffff) return;
    this.sum[i] = (this.sum[i] ?? 0) + value;
    this.n[i] = n + 1;
  }

  /** Mean of the samples in whole buckets inside [until - span, until), or undefined when there are none. */
  mean(until: number): number | undefined {
    let sum = 0;
    let n = 0;
    const from = Math.ceil((until - this.spanMs) / this.bucketMs);
    const to = Math.floor(until / this.bucketMs); // exclusive: the bucket holding `until` is not whole
    for (let b = Math.max(from, this.last - this.slot.length + 1); b < to; b++) {
      const i = b % this.slot.length;
      if (this.slot[i] !== b) continue;
      sum += this.sum[i] ?? 0;
      n += this.n[i] ?? 0;
    }
    return n ? sum / n : undefined;
  }
}

/** A mean over the time its samples held (each at most `holdMs`): a silence is left out, not counted as 0. */
export interface HeldMean {
  at: number;
  value: number;
  area: number;
  /** ms the samples before `at` held. */
  span: number;
}

export function addHeld(s: HeldMean | undefined, at: number, value: number, holdMs: number): HeldMean {
  if (!s) return { at, value, area: 0, span: 0 };
  if (at < s.at) return s;
  if (at === s.at) return { ...s, value };
  const dt = Math.min(at - s.at, holdMs);
  return { at, value, area: s.area + s.value * dt, span: s.span + dt };
}

export function heldMean(s: HeldMean | undefined, until: number, holdMs: number): number | undefined {
  if (!s) return undefined;
  const tail = Math.max(0, Math.min(until - s.at, holdMs));
  const span = s.span + tail;
  return span > 0 ? (s.area + s.value * tail) / span : s.value;
}

/**
 * A running event taken up again after a restart (B4): the time since its last sample is a
 * gap, listed in `details.gaps`; the first reading after `resumed_at` counts for the whole
 * gap (a device that held its setpoint delivered). False when there is no gap.
 */
export function resumed(
  row: {
    spec: { start_ms: number };
    progress: {
      driven?: MeanState;
      window_from?: number;
      resumed_at?: number;
      put_back?: boolean;
      gaps?: Array<{ from: number; to: number }>;
    };
  },
  now: number,
): boolean {
  const p = row.progress;
  const last = p.driven?.at ?? p.window_from ?? row.spec.start_ms;
  if (last >= now) return false;
  // After a clean stop the devices were put back: the gap delivered nothing.
  if (p.put_back) delete p.put_back;
  else p.resumed_at = now;
  (p.gaps ??= []).push({ from: last, to: now });
  return true;
}
