// The open events in memory: scheduled ones in a min-heap by start time (the next boundary
// is its root), running ones apart (they are few). Every operation the scheduler does per
// request, tick or snapshot is then independent of how many events wait in the future:
// adding an event is O(log n) (O(1) on average for starts in no particular order), never a
// shift of the whole queue, and removing one only marks its heap entry, which is dropped
// when it reaches the root or when dead entries outnumber live ones (the heap is rebuilt).
import type { EventRow } from "./store.js";

/** A scheduled event's place in the heap, keyed by its start and id when it was added. */
interface Entry {
  row: EventRow;
  start: number;
  id: string;
  /** False once the event was removed or replaced: the entry is dead and skipped. */
  live: boolean;
}

function before(a: Entry, b: Entry): boolean {
  return a.start < b.start || (a.start === b.start && a.id < b.id);
}

export class Timeline {
  private readonly byId = new Map<string, EventRow>();
  /** The scheduled events' live entries by event_id. */
  private readonly queued = new Map<string, Entry>();
  private heap: Entry[] = [];
  readonly running = new Map<string, EventRow>();

  get size(): number {
    return this.byId.size;
  }

  get scheduledCount(): number {
    return this.queued.size;
  }

  get(eventId: string): EventRow | undefined {
    return this.byId.get(eventId);
  }

  /** Adds or replaces an open event (by its state: scheduled or running). */
  put(row: EventRow): void {
    const id = row.spec.event_id;
    this.remove(id);
    this.byId.set(id, row);
    if (row.state === "running") {
      this.running.set(id, row);
      return;
    }
    const e: Entry = { row, start: row.spec.start_ms, id, live: true };
    this.queued.set(id, e);
    this.heap.push(e);
    this.up(this.heap.length - 1);
  }

  remove(eventId: string): void {
    if (!this.byId.delete(eventId)) return;
    if (this.running.delete(eventId)) return;
    const e = this.queued.get(eventId);
    if (!e) return;
    e.live = false;
    this.queued.delete(eventId);
    this.prune();
    if (this.heap.length > 64 && this.heap.length > 2 * this.queued.size) this.rebuild();
  }

  /** Scheduled events whose start is due, oldest first (they stay queued until moved). */
  due(now: number): EventRow[] {
    this.prune();
    const found: Entry[] = [];
    const visit = (i: number) => {
      // The heap order: nothing below an entry that starts later starts earlier.
      const e = this.heap[i];
      if (e === undefined || e.start > now) return;
      if (e.live) found.push(e);
      visit(2 * i + 1);
      visit(2 * i + 2);
    };
    visit(0);
    return found.sort((a, b) => (before(a, b) ? -1 : before(b, a) ? 1 : 0)).map((e) => e.row);
  }

  /** The earliest start among scheduled events, or Infinity. */
  nextStart(): number {
    this.prune();
    return this.heap[0]?.start ?? Infinity;
  }

  all(): EventRow[] {
    return [...this.byId.values()];
  }

  /** Drops dead entries from the root, so that the root is the earliest live event. */
  private prune(): void {
    const h = this.heap;
    while (h[0] && !h[0].live) {
      const last = h.pop()!;
      if (h.length) {
        h[0] = last;
        this.down(0);
      }
    }
  }

  /** The live entries only, heapified again: O(n), after as many removals. */
  private rebuild(): void {
    this.heap = this.heap.filter((e) => e.live);
    for (let i = (this.heap.length >>> 1) - 1; i >= 0; i--) this.down(i);
  }

  private up(i: number): void {
    const h = this.heap;
    const e = h[i];
    if (e === undefined) return;
    while (i > 0) {
      const p = (i - 1) >>> 1;
      // p < i < h.length: the parent is there.
      const parent = h[p]!;
      if (!before(e, parent)) break;
      h[i] = parent;
      i = p;
    }
    h[i] = e;
  }

  private down(i: number): void {
    const h = this.heap;
    const n = h.length;
    const e = h[i];
    if (e === undefined) return;
    for (;;) {
      let c = 2 * i + 1;
      // Both children are checked against n just before they are read.
      if (c >= n) break;
      if (c + 1 < n && before(h[c + 1]!, h[c]!)) c++;
      const child = h[c]!;
      if (!before(child, e)) break;
      h[i] = child;
      i = c;
    }
    h[i] = e;
  }
}
