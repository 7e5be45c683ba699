// Points a device does not have. A point (or the block that holds it) that answers
// exception 2 (illegal address), or stays silent while the device's other points answer,
// is unavailable for that device: left out of its polls, probed again hourly, and shown.
// The device stays online with what answers. A point the role cannot do without (the
// profile's `required: true`, and at least the role's minimum below, DESIGN B9) is never
// left out: its absence refuses the pairing and fails the poll.
import { SitegateError } from "../../errors.js";
import type { Role } from "../../model/roles.js";

/** How long an unavailable point is left out before it is read again. */
export const PROBE_INTERVAL_MS = 3_600_000;

/** The metrics a role cannot do without, whatever the profile says (B9). */
export const ROLE_MINIMUM: Readonly<Partial<Record<Role, readonly string[]>>> = {
  battery: ["power_w", "soc_pct"],
  pv: ["power_w"],
  meter: ["power_w"],
};

/** Whether a point of this role is required: marked so in its profile, or in the role's minimum. */
export function isRequired(role: Role, metric: string, marked: boolean): boolean {
  return marked || (ROLE_MINIMUM[role]?.includes(metric) ?? false);
}

export interface UnavailablePoint {
  metric: string;
  /** Why: "illegal address" or "no answer". */
  reason: string;
  /** When it was first found missing (ms since the epoch). */
  since: number;
  /** When it is read again. */
  next_probe_at: number;
}

/** Exception 2 (illegal data address): the device says it has no such register. */
export function isIllegalAddress(e: unknown): boolean {
  return (
    e instanceof SitegateError && e.code === "MODBUS_EXCEPTION" && e.details.some((d) => d.path === "exception_code" && d.message === "2")
  );
}

/** No answer at all. */
export function isSilent(e: unknown): boolean {
  return e instanceof SitegateError && e.code === "MODBUS_TIMEOUT";
}

/** A failed read that makes a point unavailable when other points of the device answer. */
export function isMissing(e: unknown): boolean {
  return isIllegalAddress(e) || isSilent(e);
}

/** The unavailable points of one device, on an injected clock. */
export class Unavailable {
  private readonly points = new Map<string, UnavailablePoint>();

  constructor(private readonly now: () => number) {}

  mark(metric: string, e: unknown): void {
    const t = this.now();
    const since = this.points.get(metric)?.since ?? t;
    const reason = isIllegalAddress(e) ? "illegal address" : "no answer";
    this.points.set(metric, { metric, reason, since, next_probe_at: t + PROBE_INTERVAL_MS });
  }

  /** The point answered (its probe, or a new pairing): it is polled again. */
  clear(metric: string): void {
    this.points.delete(metric);
  }

  /** How many points are unavailable now. */
  get size(): number {
    return this.points.size;
  }

  has(metric: string): boolean {
    return this.points.has(metric);
  }

  /** Whether the point is left out of a read now: unavailable, its probe not yet due. */
  skipped(metric: string): boolean {
    const u = this.points.get(metric);
    return u !== undefined && this.now() < u.next_probe_at;
  }

  /** The metrics left out now, sorted (a key for the read plans). */
  skippedNow(): string[] {
    return [...this.points.keys()].filter((m) => this.skipped(m)).sort();
  }

  list(): UnavailablePoint[] {
    return [...this.points.values()].sort((a, b) => a.metric.localeCompare(b.metric));
  }

  reset(): void {
    this.points.clear();
  }
}
