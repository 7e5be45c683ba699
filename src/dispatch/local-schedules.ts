// Local schedules (config `schedules`): each occurrence becomes an event on the same
// dispatcher at priority 100, below every partner event. The cron expression is read in
// wall-clock time of the schedule's zone, and each wall time is resolved to one instant:
// a time that daylight saving skips (02:30 on a spring-forward day in Europe/Berlin) runs
// at the first valid instant after the gap (03:00 local); a time that autumn repeats runs
// at its first instant only. The event id is derived from the schedule's name and that
// instant, and the event store keeps every occurrence it was given, so a restart inside
// the repeated hour, or a clock step, never adds one twice.
// node-cron only parses and matches (a task that is never started); the ticks are this
// part's own timer on the injected clock, once a minute, re-reading the wall clock.
import { zoneFormat } from "../util/wall-time.js";
import type { ScheduledTask } from "node-cron";
import { nodeCron } from "../util/node-cron.js";
import type { Part } from "../lifecycle.js";
import type { Logger } from "../log.js";
import { systemClock, type Clock } from "../util/clock.js";
import { nameKey } from "../util/idempotency.js";
import type { EventSpec } from "./request.js";
import { UNITS } from "../model/vocabulary.js";
import type { Schedule } from "../config/schedule-schema.js";

export const LOCAL_PRIORITY = 100;

const MIN = 60_000;
const HOUR = 3_600_000;
/** Far enough back to find the offset before a DST transition from any instant inside its gap or repeat. */
const BEFORE_TRANSITION_MS = 3 * 3_600_000;

export function occurrence(s: Schedule, fireMs: number): EventSpec {
  const start = Math.floor(fireMs / 1000) * 1000;
  return {
    event_id: nameKey("sitegate-schedule", `${s.name}@${new Date(start).toISOString()}`),
    source: `local:${s.name}`,
    mode: "live",
    event_type: s.event_type,
    quantity: s.event_quantity,
    unit: s.event_unit,
    quantity_w: s.event_quantity * UNITS[s.event_unit],
    start_ms: start,
    end_ms: start + s.duration_s * 1000,
    priority: LOCAL_PRIORITY,
    mandatory: false,
    cancelled: false,
  };
}

/**
 * One schedule's wall clock: an instant's local time as epoch ms of the same Y-M-D h:m:s
 * in UTC ("wall ms"), and the cron matched against wall ms (a matcher in UTC, so the
 * fields are compared with the local time as it reads on a clock in that zone).
 */
export class ScheduleClock {
  private readonly fmt: Intl.DateTimeFormat;
  private readonly matcher: ScheduledTask;
  private readonly seconds: readonly number[];
  private readonly minutes: ReadonlySet<number>;
  private readonly hours: ReadonlySet<number>;
  /** The zone's UTC offset at whole hours, so a minute away from a transition costs no Intl call. */
  private readonly hourOffsets = new Map<number, number>();

  constructor(readonly schedule: Schedule) {
    this.fmt = zoneFormat(schedule.timezone);
    this.matcher = nodeCron().createTask(schedule.cron, () => {}, { timezone: "UTC" });
    const fields = nodeCron().parse(schedule.cron);
    this.seconds = fields.second;
    this.minutes = new Set(fields.minute);
    this.hours = new Set(fields.hour);
  }

  wall(t: number): number {
    // The format asks for all six fields, so every one is overwritten.
    const p = { year: 0, month: 1, day: 1, hour: 0, minute: 0, second: 0 };
    for (const part of this.fmt.formatToParts(new Date(t))) if (part.type in p) p[part.type as keyof typeof p] = Number(part.value);
    return Date.UTC(p.year, p.month - 1, p.day, p.hour, p.minute, p.second) + (t % 1000);
  }

  /** The instants in the minute starting at `t` (a whole minute) at which an occurrence is due. */
  dueIn(t: number): number[] {
    const o = this.steadyOffset(t);
    if (o !== undefined) return this.matchesAt(t + o, t);
    const w = this.wall(t);
    // A gap ends at t: every wall time it skipped runs now, at the first valid instant after it.
    const before = this.wall(t - MIN);
    for (let g = before + MIN; g < w; g += MIN) if (this.matchesAt(g, t).length) return [t];
    if (this.repeated(t, w)) return [];
    return this.matchesAt(w, t);
  }

  /** The instants from `t` on at which the cron matches wall minute `w` (minute and hour first: no Intl call for most minutes). */
  private matchesAt(w: number, t: number): number[] {
    const d = new Date(w);
    if (!this.minutes.has(d.getUTCMinutes()) || !this.hours.has(d.getUTCHours())) return [];
    return this.seconds.filter((s) => this.matcher.match(new Date(w + s * 1000))).map((s) => t + s * 1000);
  }

  /** The UTC offset at `t` when it has not changed from BEFORE_TRANSITION_MS before it to the next whole hour. */
  private steadyOffset(t: number): number | undefined {
    const last = Math.floor(t / HOUR) * HOUR + HOUR;
    const o = this.offsetAtHour(last);
    for (let h = Math.floor((t - BEFORE_TRANSITION_MS) / HOUR) * HOUR; h < last; h += HOUR)
      if (this.offsetAtHour(h) !== o) return undefined;
    return o;
  }

  private offsetAtHour(h: number): number {
    let o = this.hourOffsets.get(h);
    if (o === undefined) {
      if (this.hourOffsets.size >= 512) this.hourOffsets.clear();
      o = this.wall(h) - h;
      this.hourOffsets.set(h, o);
    }
    return o;
  }

  /** Whether the wall time `w` of instant `t` was already shown by an earlier instant (an autumn repeat). */
  private repeated(t: number, w: number): boolean {
    const earlier = w - (this.wall(t - BEFORE_TRANSITION_MS) - (t - BEFORE_TRANSITION_MS));
    return earlier < t && this.wall(earlier) === w;
  }

  destroy(): void {
    void this.matcher.destroy();
  }
}

export class LocalSchedules implements Part {
  readonly name = "schedules";
  private clocks: ScheduleClock[] = [];
  private timer: unknown = null;
  /** The wall time up to which occurrences were looked at. */
  private scanned = -Infinity;

  constructor(
    private readonly schedules: readonly Schedule[],
    private readonly target: { submitLocal(spec: EventSpec): boolean },
    private readonly log: Logger,
    private readonly clock: Pick<Clock, "now" | "setTimer" | "clearTimer"> = systemClock,
  ) {}

  start(): void {
    if (!this.schedules.length) return;
    this.clocks = this.schedules.map((s) => new ScheduleClock(s));
    this.scanned = -Infinity;
    this.log.info({ schedules: this.schedules.map((s) => `${s.name} (${s.cron} ${s.timezone})`) }, "local schedules armed");
    this.tick();
  }

  /**
   * Adds every occurrence due since the last look whose window is still open: at start,
   * one taken up for what is left of it. A step of the wall clock looks back at most one
   * window; an occurrence seen again is the same event id, which the dispatcher keeps once.
   */
  private tick(): void {
    this.timer = null;
    const now = this.clock.now();
    for (const c of this.clocks) {
      const from = Math.max(now - c.schedule.duration_s * 1000, Math.min(this.scanned, now));
      for (let t = Math.floor(from / MIN) * MIN; t <= now; t += MIN)
        for (const at of c.dueIn(t)) if (at > from && at <= now) this.fire(c.schedule, at);
    }
    this.scanned = now;
    this.timer = this.clock.setTimer(() => this.tick(), MIN - (now % MIN));
  }

  fire(s: Schedule, at: number): void {
    const spec = occurrence(s, at);
    try {
      if (this.target.submitLocal(spec))
        this.log.info(
          { schedule: s.name, event_id: spec.event_id, start: new Date(spec.start_ms).toISOString() },
          "local schedule occurrence added",
        );
    } catch (e) {
      this.log.error({ schedule: s.name, err: (e as Error).message }, "cannot add a local schedule occurrence");
    }
  }

  stop(): void {
    if (this.timer !== null) this.clock.clearTimer(this.timer);
    this.timer = null;
    for (const c of this.clocks) c.destroy();
    this.clocks = [];
  }
}
