// Throttles for guessing, shared by the token endpoint and the status page login: the key
// of a source address (sourceKey), a bounded map that evicts entries that no longer
// matter first (LruMap), failures per key in a window with an optional global budget
// (FailureThrottle), and an exponential lock per username (Backoff). Why they are keyed and
// bounded so: docs/security.md ("Throttles").
import { isIPv4 } from "node:net";

function expandIPv6(ip: string): number[] | null {
  let s = ip;
  const zone = s.indexOf("%");
  if (zone >= 0) s = s.slice(0, zone);
  const lastColon = s.lastIndexOf(":");
  if (s.includes(".", lastColon)) {
    // An embedded IPv4 tail (::1.2.3.4, 64:ff9b::1.2.3.4) is the last two groups.
    const v4 = s.slice(lastColon + 1);
    if (!isIPv4(v4)) return null;
    const [b0 = 0, b1 = 0, b2 = 0, b3 = 0] = v4.split(".").map(Number);
    s = `${s.slice(0, lastColon + 1)}${((b0 << 8) | b1).toString(16)}:${((b2 << 8) | b3).toString(16)}`;
  }
  const halves = s.split("::");
  if (halves.length > 2) return null;
  const parse = (h: string) => (h === "" ? [] : h.split(":").map((g) => (/^[0-9a-fA-F]{1,4}$/.test(g) ? parseInt(g, 16) : NaN)));
  const head = parse(halves[0] ?? "");
  const rest = parse(halves[1] ?? "");
  const fill = halves.length === 2 ? 8 - head.length - rest.length : 0;
  if (fill < 0 || (halves.length === 2 && fill === 0)) return null;
  const groups = [...head, ...new Array<number>(fill).fill(0), ...rest];
  if (groups.length !== 8 || groups.some((g) => Number.isNaN(g))) return null;
  return groups;
}

/** The throttle key of a source address: IPv4 as is, IPv6 by its /64. */
export function sourceKey(ip: string): string {
  const mapped = /^::ffff:(\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3})$/i.exec(ip)?.[1];
  if (mapped) return mapped;
  if (isIPv4(ip)) return ip;
  const g = expandIPv6(ip);
  if (!g) return ip; // not an address (cannot happen for a socket's peer): its own key
  return `${g
    .slice(0, 4)
    .map((x) => x.toString(16))
    .join(":")}::/64`;
}

/** A Map bounded to `capacity` that evicts least recently used entries, disposable ones first. */
export class LruMap<V> {
  private readonly map = new Map<string, V>();

  constructor(
    private readonly capacity: number,
    private readonly disposable: (v: V) => boolean,
  ) {}

  get size(): number {
    return this.map.size;
  }

  /** The value, now most recently used. */
  get(key: string): V | undefined {
    const v = this.map.get(key);
    if (v !== undefined) {
      this.map.delete(key);
      this.map.set(key, v);
    }
    return v;
  }

  /** The value without touching its recency. */
  peek(key: string): V | undefined {
    return this.map.get(key);
  }

  set(key: string, v: V): void {
    if (this.map.has(key)) this.map.delete(key);
    else if (this.map.size >= this.capacity) this.evictOne();
    this.map.set(key, v);
  }

  delete(key: string): void {
    this.map.delete(key);
  }

  private evictOne(): void {
    for (const [k, v] of this.map) {
      if (this.disposable(v)) {
        this.map.delete(k);
        return;
      }
    }
    const oldest = this.map.keys().next().value; // every entry matters: the least recent goes
    if (oldest !== undefined) this.map.delete(oldest);
  }
}

export interface FailureThrottleOptions {
  /** Failures per key within the window before the key is refused. */
  max: number;
  windowMs: number;
  /** Keys remembered at most (default 1024). */
  capacity?: number;
  /** Failures of all keys together within the window before everyone is refused (default: none). */
  globalMax?: number;
  now?: () => number;
}

/**
 * At most `max` failures per key within `windowMs`: then the key is refused until its
 * oldest failure leaves the window. With `globalMax`, also at most that many failures
 * across all keys. Memory: capacity × max timestamps, plus globalMax.
 */
export class FailureThrottle {
  private readonly keys: LruMap<number[]>;
  private readonly all: number[] = [];
  private readonly now: () => number;

  constructor(private readonly o: FailureThrottleOptions) {
    this.now = o.now ?? Date.now;
    this.keys = new LruMap(o.capacity ?? 1024, (list) => this.live(list).length < o.max);
  }

  private live(list: number[]): number[] {
    const cut = this.now() - this.o.windowMs;
    let i = 0;
    while (i < list.length && list[i]! <= cut) i++;
    if (i > 0) list.splice(0, i);
    return list;
  }

  /** Seconds until `key` may try again (its own limit or the global budget), or 0. */
  retryAfterS(key: string): number {
    const now = this.now();
    let until = 0;
    const list = this.keys.peek(key);
    // Both lists hold at least max entries here, so the indexes are inside them.
    if (list && this.live(list).length >= this.o.max) until = list[list.length - this.o.max]! + this.o.windowMs;
    if (this.o.globalMax !== undefined && this.live(this.all).length >= this.o.globalMax) {
      until = Math.max(until, this.all[this.all.length - this.o.globalMax]! + this.o.windowMs);
    }
    return until > now ? Math.max(1, Math.ceil((until - now) / 1000)) : 0;
  }

  /** Whether the global budget (not one key's limit) is what refuses now. */
  globalExhausted(): boolean {
    return this.o.globalMax !== undefined && this.live(this.all).length >= this.o.globalMax;
  }

  /** Counts a failure of `key` now; returns its time, which forgive() takes back. */
  fail(key: string): number {
    const t = this.now();
    const list = this.live(this.keys.get(key) ?? []);
    list.push(t);
    if (list.length > this.o.max) list.splice(0, list.length - this.o.max);
    this.keys.set(key, list);
    if (this.o.globalMax !== undefined) {
      this.all.push(t);
      if (this.all.length > this.o.globalMax) this.all.splice(0, this.all.length - this.o.globalMax);
    }
    return t;
  }

  /** Takes back one failure counted at `t` (an attempt counted in advance that did not fail). */
  forgive(key: string, t: number): void {
    const drop = (list: number[]) => {
      const i = list.lastIndexOf(t);
      if (i >= 0) list.splice(i, 1);
    };
    const list = this.keys.peek(key);
    if (list) drop(list);
    if (this.o.globalMax !== undefined) drop(this.all);
  }

  succeed(key: string): void {
    this.keys.delete(key);
  }

  get size(): number {
    return this.keys.size;
  }
}

export interface BackoffOptions {
  /** Failures in a row allowed before the first lock. */
  free: number;
  /** The first lock; each further failure doubles it, up to maxMs. */
  baseMs: number;
  maxMs: number;
  /** A key with no failure for this long starts over. */
  forgetMs: number;
  capacity?: number;
  now?: () => number;
}

interface BackoffEntry {
  failures: number;
  last: number;
  lockedUntil: number;
}

/** Exponential backoff per key (a username): free, free, ..., then 1×, 2×, 4× baseMs locks. */
export class Backoff {
  private readonly keys: LruMap<BackoffEntry>;
  private readonly now: () => number;

  constructor(private readonly o: BackoffOptions) {
    this.now = o.now ?? Date.now;
    this.keys = new LruMap(o.capacity ?? 1024, (e) => this.stale(e) || e.lockedUntil <= this.now());
  }

  private stale(e: BackoffEntry): boolean {
    return this.now() - e.last > this.o.forgetMs && e.lockedUntil <= this.now();
  }

  retryAfterS(key: string): number {
    const e = this.keys.peek(key);
    const now = this.now();
    if (!e || e.lockedUntil <= now) return 0;
    return Math.max(1, Math.ceil((e.lockedUntil - now) / 1000));
  }

  fail(key: string): void {
    const now = this.now();
    let e = this.keys.get(key);
    if (!e || this.stale(e)) e = { failures: 0, last: now, lockedUntil: 0 };
    e.failures++;
    e.last = now;
    const over = e.failures - this.o.free;
    if (over > 0) e.lockedUntil = now + Math.min(this.o.maxMs, this.o.baseMs * 2 ** Math.min(over - 1, 30));
    this.keys.set(key, e);
  }

  succeed(key: string): void {
    this.keys.delete(key);
  }
}
