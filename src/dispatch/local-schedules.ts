// Local schedules (config `schedules`) on node-cron: each occurrence becomes an event on
// the same dispatcher at priority 100, below every partner event, with an id derived from
// the schedule's name and the occurrence's time, so a restart or a clock step can never
// add it twice. At start, an occurrence whose window is still open is taken up (checked
// on whole minutes back over its duration).
import type { ScheduledTask } from "node-cron";
import { nodeCron } from "../util/node-cron.js";
import type { Part } from "../lifecycle.js";
import type { Logger } from "../log.js";
import { nameKey } from "../util/idempotency.js";
import type { EventSpec } from "./request.js";
import { UNITS } from "./request.js";
import type { Schedule } from "../config/schedule-schema.js";

export const LOCAL_PRIORITY = 100;

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

export class LocalSchedules implements Part {
  readonly name = "schedules";
  private tasks: ScheduledTask[] = [];

  constructor(
    private readonly schedules: readonly Schedule[],
    private readonly target: { submitLocal(spec: EventSpec): boolean },
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
  ) {}

  start(): void {
    for (const s of this.schedules) {
      const task = nodeCron().schedule(s.cron, (ctx) => this.fire(s, ctx.date.getTime()), {
        timezone: s.timezone,
        name: `schedule:${s.name}`,
        noOverlap: true,
      });
      this.tasks.push(task);
      const open = this.openOccurrence(s, task);
      if (open !== undefined) this.fire(s, open);
    }
    if (this.schedules.length)
      this.log.info({ schedules: this.schedules.map((s) => `${s.name} (${s.cron} ${s.timezone})`) }, "local schedules armed");
  }

  /** The start of an occurrence whose window holds now, if any. */
  openOccurrence(s: Schedule, task: Pick<ScheduledTask, "match">): number | undefined {
    const now = this.now();
    const minute = Math.floor(now / 60_000) * 60_000;
    for (let t = minute; t > now - s.duration_s * 1000; t -= 60_000) if (task.match(new Date(t))) return t;
    return undefined;
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
    for (const t of this.tasks) void t.destroy();
    this.tasks = [];
  }
}
