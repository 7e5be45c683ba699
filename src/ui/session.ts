// Sessions of the status page (in memory: a restart logs everyone out) and the per-source
// throttle of failed logins. Session ids and CSRF tokens are 256-bit random strings; the
// map holds SHA-256 of the id, so a heap dump does not hand out live cookies.
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";

const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");
const MAX_SESSIONS = 64;

export interface Session {
  user: string;
  csrf: string;
  expiresAt: number;
}

export class Sessions {
  private readonly byHash = new Map<string, Session>();

  constructor(private readonly ttlMs: number, private readonly now: () => number = Date.now) {}

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

/**
 * Failed logins per source address: after `max` failures within `windowMs` the source is
 * refused (429) until the oldest failure leaves the window. A success clears the source.
 */
export class LoginThrottle {
  private readonly failures = new Map<string, number[]>();

  constructor(private readonly max = 5, private readonly windowMs = 15 * 60_000, private readonly now: () => number = Date.now) {}

  /** Seconds until the source may try again, or 0. */
  retryAfterS(ip: string): number {
    const list = this.recent(ip);
    if (list.length < this.max) return 0;
    return Math.max(1, Math.ceil((list[0] + this.windowMs - this.now()) / 1000));
  }

  fail(ip: string): void {
    const list = this.recent(ip);
    list.push(this.now());
    if (this.failures.size >= 1024 && !this.failures.has(ip)) this.failures.clear(); // bounded
    this.failures.set(ip, list);
  }

  succeed(ip: string): void {
    this.failures.delete(ip);
  }

  private recent(ip: string): number[] {
    const cut = this.now() - this.windowMs;
    return (this.failures.get(ip) ?? []).filter((t) => t > cut);
  }
}

export function parseCookies(header: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of (header ?? "").split(";")) {
    const i = part.indexOf("=");
    if (i > 0) out[part.slice(0, i).trim()] = decodeURIComponent(part.slice(i + 1).trim());
  }
  return out;
}
