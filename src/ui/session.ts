// Sessions of the status page (in memory: a restart logs everyone out) and the per-source
// throttle of failed logins (and the page's own lock per username: GuessLimits). Session ids and CSRF tokens are 256-bit random strings; the
// map holds SHA-256 of the id, so a heap dump does not hand out live cookies.
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { FailureThrottle, sourceKey } from "../api/throttle.js";

const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");
const MAX_SESSIONS = 64;

export interface Session {
  user: string;
  csrf: string;
  expiresAt: number;
}

export class Sessions {
  private readonly byHash = new Map<string, Session>();

  constructor(
    private readonly ttlMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  create(user: string): { id: string; session: Session } {
    this.sweep();
    if (this.byHash.size >= MAX_SESSIONS) {
      // Oldest out first (Map keeps insertion order).
      const first = this.byHash.keys().next().value;
      if (first !== undefined) this.byHash.delete(first);
    }
    const id = randomBytes(32).toString("base64url");
    const session = { user, csrf: randomBytes(32).toString("base64url"), expiresAt: this.now() + this.ttlMs };
    this.byHash.set(sha256(id), session);
    return { id, session };
  }

  get(id: string | undefined): Session | undefined {
    if (!id) return undefined;
    const s = this.byHash.get(sha256(id));
    if (!s) return undefined;
    if (s.expiresAt <= this.now()) {
      this.byHash.delete(sha256(id));
      return undefined;
    }
    return s;
  }

  destroy(id: string | undefined): void {
    if (id) this.byHash.delete(sha256(id));
  }

  private sweep(): void {
    const now = this.now();
    for (const [k, s] of this.byHash) if (s.expiresAt <= now) this.byHash.delete(k);
  }
}

export function sameToken(a: unknown, b: string): boolean {
  if (typeof a !== "string") return false;
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** Failed logins of all sources together within the window before every login waits. */
export const UI_GLOBAL_FAILURES = 100;

/**
 * Failed logins per source: after `max` failures within `windowMs` the source is refused
 * (429) until its oldest failure leaves the window; a success clears the source. Sources
 * are keyed by address, IPv6 by /64 (sourceKey). Bounded to 1024 sources, least recently
 * used first and never a locked one while another can go, so filling the table from many
 * addresses does not unlock anyone; and `globalMax` failures from all sources together
 * within the window lock every source, which also caps how fast the table can be filled.
 */
export class LoginThrottle {
  private readonly t: FailureThrottle;

  constructor(max = 5, windowMs = 15 * 60_000, now: () => number = Date.now, opts: { capacity?: number; globalMax?: number } = {}) {
    this.t = new FailureThrottle({ max, windowMs, now, capacity: opts.capacity ?? 1024, globalMax: opts.globalMax ?? UI_GLOBAL_FAILURES });
  }

  /** Seconds until the source may try again, or 0. */
  retryAfterS(ip: string): number {
    return this.t.retryAfterS(sourceKey(ip));
  }

  /** Whether every source waits because of the global budget. */
  globalExhausted(): boolean {
    return this.t.globalExhausted();
  }

  /** Counts a failure now; returns its time for forgive(). */
  fail(ip: string): number {
    return this.t.fail(sourceKey(ip));
  }

  forgive(ip: string, t: number): void {
    this.t.forgive(sourceKey(ip), t);
  }

  succeed(ip: string): void {
    this.t.succeed(sourceKey(ip));
  }

  get size(): number {
    return this.t.size;
  }
}

/** Cookies of a Cookie header. Never throws: a value that is not valid percent-encoding is kept as sent. */
export function parseCookies(header: string | undefined): Record<string, string> {
  const out: Record<string, string> = Object.create(null) as Record<string, string>;
  for (const part of (header ?? "").split(";")) {
    const i = part.indexOf("=");
    if (i <= 0) continue;
    const raw = part.slice(i + 1).trim();
    let value = raw;
    if (raw.includes("%")) {
      try {
        value = decodeURIComponent(raw);
      } catch {
        value = raw;
      }
    }
    out[part.slice(0, i).trim()] = value;
  }
  return out;
}
