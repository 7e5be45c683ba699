// The one retry policy of every connection to an endpoint: the fleet broker, the Zigbee
// broker (MqttRedial, through ReconnectBackoff) and the partner's HTTPS (the delivery lanes,
// through retryDelayMs). Exponential from 1 s to a cap, with full jitter (a uniform draw
// between 0 and the current ceiling), so that a fleet that lost its broker or its partner at
// the same instant spreads its attempts and makes fewer of them the longer the outage lasts.
// The cap is 5 min for a remote endpoint and 30 s for a loopback one (the local
// zigbee2mqtt, a partner on this machine). The ceiling goes back to 1 s only after success:
// a broker connection that has held for HOLD_MS (one that accepts and drops at once does not
// reset it), or a message the receiver accepted (the next failure is its first again).
import { isLoopbackHost } from "./loopback.js";

export const RECONNECT_BASE_MS = 1000;
/** A remote endpoint (the fleet's broker, the partner, across the internet). */
export const REMOTE_CAP_MS = 300_000;
/** A loopback endpoint (the local zigbee2mqtt broker): it is back within seconds of a restart. */
export const LOOPBACK_CAP_MS = 30_000;
/** A connection that held this long resets the ceiling to the base. */
export const HOLD_MS = 60_000;

export interface BackoffPolicy {
  baseMs: number;
  capMs: number;
  holdMs: number;
}

/** The policy for an endpoint's host (a broker's, the partner's): the cap depends on whether it is this machine's own. */
export function brokerBackoff(host: string): BackoffPolicy {
  return { baseMs: RECONNECT_BASE_MS, capMs: isLoopbackHost(host) ? LOOPBACK_CAP_MS : REMOTE_CAP_MS, holdMs: HOLD_MS };
}

/** The policy for a message to `url` (an https:// callback or data push): its host's cap. */
export function urlBackoff(url: string): BackoffPolicy {
  let host = "";
  try {
    host = new URL(url).hostname;
  } catch {
    // not a URL (a topic): a remote endpoint
  }
  return brokerBackoff(host);
}

/** The ceiling before attempt `failures` + 1: base * 2^failures, at most the cap. */
export function backoffCeiling(p: BackoffPolicy, failures: number): number {
  return Math.min(p.capMs, p.baseMs * 2 ** Math.min(failures, 40));
}

/**
 * The delay before retry number `attempt` (1 = the first retry) of a message: a uniform draw
 * below the ceiling after `attempt` - 1 earlier failures. The lanes count a message's
 * attempts from its first, so a message accepted resets the next one to 1 s.
 */
export function retryDelayMs(p: BackoffPolicy, attempt: number, rand: () => number = Math.random): number {
  return Math.floor(rand() * backoffCeiling(p, Math.max(0, attempt - 1)));
}

/** A lane's retry delay for a message to `address` (a URL's host sets the cap). */
export function laneRetryDelay(attempt: number, address: string): number {
  return retryDelayMs(urlBackoff(address), attempt);
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
    this.failures++;
    // Retry number `failures`: the same full-jitter draw as a lane's message.
    return retryDelayMs(this.policy, this.failures, this.rand);
  }

  /** Failures since the last connection that held (for logs). */
  get streak(): number {
    return this.failures;
  }
}
