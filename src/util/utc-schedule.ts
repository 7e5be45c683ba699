// Recurring jobs at fixed UTC times on plain timers (the nightly maintenance). A time is a
// period and an offset from the epoch, which began at UTC midnight: "daily at 03:30 UTC" is
// every 24 h from 03:30, "every 10 min" every 10 min from 00:00; or a daily wall time in a
// zone. Intl only for a named zone: node-cron formats every tick through Intl.DateTimeFormat,
// which pages in ~6.5 MiB of ICU data the daemon otherwise never touches (docs/sizing.md,
// where the memory goes).
// A timer wakes at least every 10 min and re-reads the wall clock, so a clock step delays
// a job by at most that; a step over several occurrences runs the job once.
import { systemClock, type Clock } from "./clock.js";
import { SitegateError } from "../errors.js";
import { localOffset, wallDate, wallToInstant, zoneOffset, type OffsetAt } from "./wall-time.js";

export interface UtcRecurrence {
  everyMs: number;
  /** Offset of the first occurrence from UTC midnight, ms (0 <= atMs < everyMs). */
  atMs: number;
  /** How the README and the log say it. */
  text: string;
  /** A wall time in a zone instead of a fixed offset (dailyLocal, dailyInZone). */
  nextAfter?: (now: number) => number;
}

const MIN = 60_000;
const DAY = 86_400_000;
const MAX_SLEEP = 10 * MIN;

export function dailyUtc(hhmm: string): UtcRecurrence {
  const m = /^(\d\d):(\d\d)$/.exec(hhmm);
  if (!m || Number(m[1]) > 23 || Number(m[2]) > 59) throw new SitegateError("CONFIG_INVALID", `not a time of day: ${hhmm}`);
  return { everyMs: DAY, atMs: (Number(m[1]) * 60 + Number(m[2])) * MIN, text: `daily ${hhmm} UTC` };
}

/**
 * Daily at HH:MM in the process's own zone (TZ, else /etc/localtime), through Date's
 * local-time methods (about 0.5 MiB; Intl and its ICU data are not touched).
 */
export function dailyLocal(hhmm: string): UtcRecurrence {
  return dailyWall(hhmm, localOffset, `daily ${hhmm} local time (${process.env.TZ || "/etc/localtime"})`);
}

/** Daily at HH:MM in a named IANA zone, through Intl; the process's TZ is left alone. */
export function dailyInZone(hhmm: string, zone: string): UtcRecurrence {
  return dailyWall(hhmm, zoneOffset(zone), `daily ${hhmm} ${zone}`);
}

/**
 * Daily at a wall time of a zone. Daylight saving moves the UTC instant; a time skipped by
 * a spring-forward runs at the end of the gap, a time repeated in autumn runs once, at its
 * first instant (util/wall-time.ts).
 */
function dailyWall(hhmm: string, offsetAt: OffsetAt, text: string): UtcRecurrence {
  const at = dailyUtc(hhmm).atMs;
  return {
    everyMs: DAY,
    atMs: 0,
    text,
    nextAfter(now: number): number {
      const today = wallDate(now, offsetAt);
      for (let day = 0; day < 3; day++) {
        const t = wallToInstant(today + day * DAY + at, offsetAt);
        if (t > now) return t;
      }
      return now + DAY;
    },
  };
}

export function everyMinutes(n: number): UtcRecurrence {
  if (!Number.isInteger(n) || n < 1 || DAY % (n * MIN) !== 0)
    throw new SitegateError("CONFIG_INVALID", `every ${n} min does not divide a day`);
  return { everyMs: n * MIN, atMs: 0, text: `every ${n} min` };
}

/** The first occurrence strictly after `now`. */
export function nextOccurrence(r: UtcRecurrence, now: number): number {
  if (r.nextAfter) return r.nextAfter(now);
  return r.atMs + (Math.floor((now - r.atMs) / r.everyMs) + 1) * r.everyMs;
}

/** Runs `fn` at every occurrence of `r` until stopped. `fn` is synchronous, so runs never overlap. */
export class UtcJob {
  private handle: unknown = null;
  private due = 0;

  constructor(
    readonly recurrence: UtcRecurrence,
    private readonly fn: () => void,
    private readonly clock: Pick<Clock, "now" | "setTimer" | "clearTimer"> = systemClock,
  ) {}

  start(): void {
    this.due = nextOccurrence(this.recurrence, this.clock.now());
    this.arm();
  }

  /** When the job runs next (epoch ms). */
  get next(): number {
    return this.due;
  }

  private arm(): void {
    this.handle = this.clock.setTimer(() => this.wake(), Math.min(MAX_SLEEP, this.due - this.clock.now()));
  }

  private wake(): void {
    this.handle = null;
    const now = this.clock.now();
    if (now >= this.due) {
      this.due = nextOccurrence(this.recurrence, now);
      this.fn();
    } else if (this.due - now > this.recurrence.everyMs) {
      // The wall clock stepped back by more than a period: aim at the next occurrence from now.
      this.due = nextOccurrence(this.recurrence, now);
    }
    if (this.handle === null && this.due > 0) this.arm();
  }

  stop(): void {
    if (this.handle !== null) this.clock.clearTimer(this.handle);
    this.handle = null;
    this.due = 0;
  }
}
