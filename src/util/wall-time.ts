// Wall times in a time zone without touching the process's TZ: the zone is a function from
// an instant to its UTC offset, and a wall time on a date resolves to exactly one instant.
// The rules are the local dispatch schedules' (docs/dispatch.md): a time that daylight
// saving skips runs at the first valid instant after the gap, a time that autumn repeats
// runs at its first instant only.

/** A zone's UTC offset (ms, east positive) at an instant. */
export type OffsetAt = (t: number) => number;

const MIN = 60_000;
/** Before and after a wall time, far enough to see the offsets on both sides of a transition. */
const AROUND_MS = 14 * 3_600_000;

/**
 * The process's own zone (TZ, else /etc/localtime), through Date's local-time methods: about
 * 0.5 MiB, where Intl pages in ICU's data (docs/operating.md).
 */
export const localOffset: OffsetAt = (t) => -new Date(t).getTimezoneOffset() * MIN;

/** A formatter of a zone's wall-clock fields (24 h), one per zone user: Intl builds it once. */
export function zoneFormat(zone: string): Intl.DateTimeFormat {
  return new Intl.DateTimeFormat("en-US", {
    timeZone: zone,
    hourCycle: "h23",
    year: "numeric",
    month: "numeric",
    day: "numeric",
    hour: "numeric",
    minute: "numeric",
    second: "numeric",
  });
}

/** A named IANA zone, through Intl (the process's TZ is never read or set). */
export function zoneOffset(zone: string): OffsetAt {
  const fmt = zoneFormat(zone);
  return (t) => {
    const p = new Map<string, number>();
    for (const part of fmt.formatToParts(new Date(t))) if (part.type !== "literal") p.set(part.type, Number(part.value));
    const f = (k: string) => p.get(k) ?? NaN;
    const whole = t - (((t % 1000) + 1000) % 1000);
    return Date.UTC(f("year"), f("month") - 1, f("day"), f("hour"), f("minute"), f("second")) - whole;
  };
}

/**
 * The instant at which a zone's clocks show `wall` (the wall time as epoch ms of the same
 * Y-M-D h:m in UTC): the first such instant in a repeated hour, the end of the gap when the
 * wall time is skipped.
 */
export function wallToInstant(wall: number, offsetAt: OffsetAt): number {
  const before = offsetAt(wall - AROUND_MS);
  const after = offsetAt(wall + AROUND_MS);
  // The earlier instant first: in a repeated hour that is the larger (pre-transition) offset.
  const candidates = [...new Set([before, after])].map((o) => wall - o).sort((a, b) => a - b);
  for (const t of candidates) if (t + offsetAt(t) === wall) return t;
  // Skipped: the clocks jumped over `wall`; the gap ends at the transition, found to the minute.
  let lo = wall - after;
  let hi = wall - before;
  while (hi - lo > MIN) {
    const mid = lo + Math.max(MIN, Math.floor((hi - lo) / 2 / MIN) * MIN);
    if (offsetAt(mid) === after) hi = mid;
    else lo = mid;
  }
  return hi;
}

/** The wall date (Y, M, D as a UTC midnight) that an instant falls on in the zone. */
export function wallDate(t: number, offsetAt: OffsetAt): number {
  const w = t + offsetAt(t);
  return w - (((w % 86_400_000) + 86_400_000) % 86_400_000);
}
