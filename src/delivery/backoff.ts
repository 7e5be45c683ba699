// Retry delays of every lane: 1 s doubling to 5 min, with ±20 % jitter so that a fleet
// of gateways does not retry in step after a partner outage.
export const BACKOFF_BASE_MS = 1000;
export const BACKOFF_MAX_MS = 300_000;

/** Delay before retry number `attempt` (1 = first retry). `rand` in [0, 1). */
export function backoffMs(attempt: number, rand: number = Math.random()): number {
  const exp = Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** Math.max(0, attempt - 1));
  return Math.round(Math.min(BACKOFF_MAX_MS, exp * (0.8 + 0.4 * rand)));
}
