// A Clock that a test moves by hand, for the dispatch scheduler, the maintenance timers and
// anything else that takes a Clock (src/util/clock.ts).
import type { Clock } from "../../src/util/clock.js";

/** A clock a test moves by hand: `advance(ms)` runs every timer that falls due, in order. */
export class FakeClock implements Clock {
  private wall: number;
  private monoMs = 0;
  private seq = 0;
  private timers = new Map<number, { at: number; fn: () => void }>();

  constructor(startWall: number) {
    this.wall = startWall;
  }

  now(): number {
    return this.wall;
  }

  mono(): number {
    return this.monoMs;
  }

  setTimer(fn: () => void, ms: number): unknown {
    const id = ++this.seq;
    this.timers.set(id, { at: this.monoMs + Math.max(0, ms), fn });
    return id;
  }

  clearTimer(h: unknown): void {
    this.timers.delete(h as number);
  }

  /** Moves both clocks forward, running due timers at their own time. */
  advance(ms: number): void {
    const until = this.monoMs + ms;
    for (;;) {
      let next: [number, { at: number; fn: () => void }] | undefined;
      for (const e of this.timers) if (e[1].at <= until && (!next || e[1].at < next[1].at)) next = e;
      if (!next) break;
      this.timers.delete(next[0]);
      this.wall += next[1].at - this.monoMs;
      this.monoMs = next[1].at;
      next[1].fn();
    }
    this.wall += until - this.monoMs;
    this.monoMs = until;
  }

  /** Steps the wall clock only (an NTP correction); timers keep their monotonic time. */
  step(ms: number): void {
    this.wall += ms;
  }

  get pending(): number {
    return this.timers.size;
  }
}
