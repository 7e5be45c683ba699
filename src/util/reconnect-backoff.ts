// When to try a broker again after a failed connect or a lost connection: exponential from
// 1 s to a cap, with full jitter (a uniform draw between 0 and the current ceiling), so that
// a fleet that lost its broker at the same instant spreads its attempts and makes fewer of
// them the longer the outage lasts. The ceiling goes back to 1 s only after a connection
// has held for HOLD_MS: a broker that accepts and drops at once does not reset it.
import { isLoopbackHost } from "./loopback.js";

export const RECONNECT_BASE_MS = 1000;
/** A remote broker (the fleet's, across the internet). */
export const REMOTE_CAP_MS = 300_000;
/** A loopback broker (the local zigbee2mqtt one): it is back within seconds of a restart. */
export const LOOPBACK_CAP_MS = 30_000;
/** A connection that held this long resets the ceiling to the base. */
export const HOLD_MS = 60_000;

export interface BackoffPolicy {
  baseMs: number;
  capMs: number;
  holdMs: number;
}

/** The policy for a broker host: the cap depends on whether it is this machine's own. */
export function brokerBackoff(host: string): BackoffPolicy {
  return { baseMs: RECONNECT_BASE_MS, capMs: isLoopbackHost(host) ? LOOPBACK_CAP_MS : REMOTE_CAP_MS, holdMs: HOLD_MS };
}

/** The ceiling before attempt `failures` + 1: base * 2^failures, at most the cap. */
export function backoffCeiling(p: BackoffPolicy, failures: number): number {
  return Math.min(p.capMs, p.baseMs * 2 ** Math.min(failures, 40));
}

/** The state of one connection's retries; pure apart from the injected clock and random source. */
export class ReconnectBackoff {
  private failures = 0;
  private upSince: number | null = null;

  constructor(
    readonly policy: BackoffPolicy,
    private readonly mono: () => number,
    private readonly rand: () => number = Math.random,
  ) {}

  /** A connection is up (CONNACK accepted). */
  connected(): void {
    this.upSince = this.mono();
  }

  /** An attempt failed or the connection was lost: the delay before the next attempt (ms). */
  next(): number {
    if (this.upSince !== null && this.mono() - this.upSince >= this.policy.holdMs) this.failures = 0;
    this.upSince = null;
    const ceiling = backoffCeiling(this.policy, this.failures);
    this.failures++;
    return Math.floor(this.rand() * ceiling);
  }

  /** Failures since the last connection that held (for logs). */
  get streak(): number {
    return this.failures;
  }
}
