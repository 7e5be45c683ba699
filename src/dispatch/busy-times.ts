// What a shed's baseline needs (B4): when any live event drove any device (a claim, or a
// ledger row not yet put back), so the latest quiet minute before it started can be
// found, and each device's power in the last 16 minutes, to take its mean over that minute.
import { RollingWindow } from "./measure.js";

/** A baseline's length: the mean of the minute before. */
export const BASELINE_MS = 60_000;
/** How far back a shed looks for a quiet minute (B4). */
export const QUIET_LOOKBACK_MS = 15 * 60_000;

export class BusyTimes {
  /** Oldest first; the last may be open. */
  private readonly spans: Array<{ from: number; to?: number }> = [];

  /** Records whether any live event drives any device now. */
  mark(busy: boolean, now: number): void {
    const last = this.spans[this.spans.length - 1];
    const open = last && last.to === undefined ? last : undefined;
    if (busy && !open) this.spans.push({ from: now });
    else if (!busy && open) open.to = now;
    while (this.spans.length > 0 && (this.spans[0]!.to ?? Infinity) < now - QUIET_LOOKBACK_MS - BASELINE_MS) this.spans.shift();
  }

  /**
   * The end of the latest 60 s before `before` in which no live event drove any device,
   * looked for up to 15 min back; undefined when there is none.
   */
  quietUntil(before: number): number | undefined {
    let end = before;
    for (let i = this.spans.length - 1; i >= 0; i--) {
      const b = this.spans[i]!;
      if (b.from >= end) continue;
      if ((b.to ?? Infinity) <= end - BASELINE_MS) break;
      end = b.from;
    }
    return end >= before - QUIET_LOOKBACK_MS ? end : undefined;
  }
}

/**
 * A device's power at the site's AC side: a hybrid inverter's AC power (its PV plus its
 * battery) where it reads one, else its power. A hybrid's `power_w` is its battery's alone:
 * the PV behind it would be missing from the site's consumption (a cloud in a shed's quiet
 * minute had then been taken for a load change; soak 918273645 #6874, #7518).
 */
export function acSide(m: Readonly<Record<string, number>> | undefined): number | undefined {
  return m?.ac_power_w ?? m?.power_w;
}

/** Each device's power readings at the AC side (acSide; for its mean over a quiet minute) and when it was last seen. */
export class PowerHistory {
  private readonly windows = new Map<string, RollingWindow>();
  private readonly seen = new Map<string, number>();

  /** One snapshot's readings. */
  add(metrics: ReadonlyMap<string, Record<string, number>>, ts: number): void {
    for (const [id, m] of metrics) {
      this.seen.set(id, ts);
      const power = acSide(m);
      if (power === undefined) continue;
      let w = this.windows.get(id);
      if (!w) this.windows.set(id, (w = new RollingWindow(BASELINE_MS, QUIET_LOOKBACK_MS + BASELINE_MS)));
      w.add(ts, power);
    }
  }

  /** The device's mean power in the minute before `until`. */
  baseline(id: string, until: number): number | undefined {
    return this.windows.get(id)?.mean(until);
  }

  /** Time of the device's latest reading (0: none yet). */
  seenAt(id: string): number {
    return this.seen.get(id) ?? 0;
  }

  /**
   * B4 stale readings: a device not seen within `staleMs` (two poll intervals plus its answer
   * timeout; 1 s when its family does not say) is offline, and its reading stale.
   */
  fresh(id: string, at: number, staleMs: number): boolean {
    return this.seenAt(id) >= at - staleMs;
  }
}
