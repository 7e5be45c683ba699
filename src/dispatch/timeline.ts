// The open events in memory: scheduled ones sorted by start time (the next boundary is
// the first), running ones apart (they are few). Every operation the scheduler does per
// request, tick or snapshot is then independent of how many events wait in the future.
import type { EventRow } from "./store.js";

function before(a: EventRow, b: EventRow): boolean {
  return a.spec.start_ms < b.spec.start_ms || (a.spec.start_ms === b.spec.start_ms && a.spec.event_id < b.spec.event_id);
}

export class Timeline {
  private readonly byId = new Map<string, EventRow>();
  private readonly queue: EventRow[] = [];
  readonly running = new Map<string, EventRow>();

  get size(): number {
    return this.byId.size;
  }

  get scheduledCount(): number {
    return this.queue.length;
  }

  get(eventId: string): EventRow | undefined {
    return this.byId.get(eventId);
  }

  /** Adds or replaces an open event (by its state: scheduled or running). */
  put(row: EventRow): void {
    this.remove(row.spec.event_id);
    this.byId.set(row.spec.event_id, row);
    if (row.state === "running") {
      this.running.set(row.spec.event_id, row);
      return;
    }
    this.queue.splice(this.lowerBound(row), 0, row);
  }

  remove(eventId: string): void {
    const row = this.byId.get(eventId);
    if (!row) return;
    this.byId.delete(eventId);
    if (this.running.delete(eventId)) return;
    const i = this.indexOf(row);
    if (i >= 0) this.queue.splice(i, 1);
  }

  /** The first queue position whose event does not start before `row`. */
  private lowerBound(row: EventRow): number {
    let lo = 0;
    let hi = this.queue.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (before(this.queue[mid], row)) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  private indexOf(row: EventRow): number {
    for (let i = this.lowerBound(row); i < this.queue.length && this.queue[i].spec.start_ms === row.spec.start_ms; i++) if (this.queue[i] === row) return i;
    return this.queue.indexOf(row);
  }

  /** Scheduled events whose start is due, oldest first (they stay queued until moved). */
  due(now: number): EventRow[] {
    const out: EventRow[] = [];
    for (const row of this.queue) {
      if (row.spec.start_ms > now) break;
      out.push(row);
    }
    return out;
  }

  /** The earliest start among scheduled events, or Infinity. */
  nextStart(): number {
    return this.queue.length ? this.queue[0].spec.start_ms : Infinity;
  }

  all(): EventRow[] {
    return [...this.byId.values()];
  }
}
