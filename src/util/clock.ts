// Time for the dispatch scheduler and the maintenance timers: the wall clock (what
// start_time and "03:30 UTC" mean), the monotonic clock (to notice when the wall clock
// steps, e.g. NTP after a boot without an RTC), and timers. Tests inject a fake one
// (test/support/fake-clock.ts) and move it by hand.

export interface Clock {
  /** Wall clock, epoch ms. */
  now(): number;
  /** Monotonic ms, unaffected by clock steps. */
  mono(): number;
  setTimer(fn: () => void, ms: number): unknown;
  clearTimer(handle: unknown): void;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  mono: () => performance.now(),
  setTimer: (fn, ms) => setTimeout(fn, Math.max(0, ms)),
  clearTimer: (h) => clearTimeout(h as NodeJS.Timeout),
};

/** Waits for `p`, or `ms` on the clock, whichever comes first. */
export async function within(clock: Clock, p: Promise<unknown>, ms: number): Promise<void> {
  let timer: unknown = null;
  const bound = new Promise<void>((r) => (timer = clock.setTimer(r, Math.max(0, ms))));
  await Promise.race([p, bound]);
  clock.clearTimer(timer);
}
