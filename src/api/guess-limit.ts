// Password attempts, for the token endpoint and the status page login alike: an
// exponential lock per username for each front end (a guess at the status page never
// locks the token endpoint, so that the LAN the page is open to cannot lock the partner
// out), each front end's own per-source throttle, and the count of passwords checked.
// An attempt is counted as a failure BEFORE its password is checked and taken back when it
// succeeds: scrypt is asynchronous, so guesses sent together would otherwise all pass the
// limit before the first of them failed. Why: docs/security.md ("Guessing").
import { HashBusyError } from "../util/secret-hash.js";
import type { MetricFamily } from "../metrics.js";
import { Backoff } from "./throttle.js";

/** Failures in a row of one username before its lock starts (1 s, 2 s, 4 s ... 15 min). */
export const USER_FREE_FAILURES = 5;

/** A per-source failure throttle as an attempt uses it. */
export interface SourceThrottle {
  retryAfterS(key: string): number;
  /** Counts a failure now; returns its time for forgive(). */
  fail(key: string): number;
  forgive(key: string, t: number): void;
}

/** Who checks the password: each counts its own guesses per username. */
export type FrontEnd = "token" | "page";

export type Attempt =
  | { result: "ok" }
  | { result: "wrong" }
  | { result: "wait"; retryAfterS: number; who: "source" | "username" }
  | { result: "busy" };

export class GuessLimits {
  /** One lock per username for each front end. */
  private readonly users: Record<FrontEnd, Backoff>;
  private checks = 0;

  constructor(now: () => number = Date.now) {
    const lock = () =>
      new Backoff({ free: USER_FREE_FAILURES, baseMs: 1000, maxMs: 15 * 60_000, forgetMs: 60 * 60_000, capacity: 4096, now });
    this.users = { token: lock(), page: lock() };
  }

  /** Passwords checked (scrypt run to its answer) since start. */
  get checked(): number {
    return this.checks;
  }

  /**
   * One attempt of `username` from `source` at front end `front`: refused while the
   * source or the username (at that front end) waits; else counted as a failure of both,
   * then checked by `check`. A right password takes the source's count back and clears the
   * username's lock at that front end; a check refused as busy takes the source's count
   * back (no password was tried).
   */
  async attempt(
    source: { throttle: SourceThrottle; key: string; front: FrontEnd },
    username: string,
    check: () => Promise<boolean>,
  ): Promise<Attempt> {
    const users = this.users[source.front];
    const sourceWait = source.throttle.retryAfterS(source.key);
    if (sourceWait > 0) return { result: "wait", retryAfterS: sourceWait, who: "source" };
    const userWait = users.retryAfterS(username);
    if (userWait > 0) return { result: "wait", retryAfterS: userWait, who: "username" };
    const at = source.throttle.fail(source.key);
    users.fail(username);
    let ok: boolean;
    try {
      ok = await check();
    } catch (e) {
      if (!(e instanceof HashBusyError)) throw e;
      source.throttle.forgive(source.key, at);
      return { result: "busy" };
    }
    this.checks++;
    if (!ok) return { result: "wrong" };
    source.throttle.forgive(source.key, at);
    users.succeed(username);
    return { result: "ok" };
  }

  metrics(): MetricFamily[] {
    return [
      {
        name: "sitegate_password_checks_total",
        help: "passwords checked (token endpoint and status page login)",
        type: "counter",
        values: [{ value: this.checks }],
      },
    ];
  }
}
