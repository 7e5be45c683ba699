// The typed event bus the parts talk through. A listener is registered under the name of
// the part it belongs to and wrapped: what it throws, or a promise it rejects, is logged
// with that part's name and counted, and never reaches the emitter or the listeners after
// it. A part's listeners are removed together by its name. Emitting is synchronous, in
// the order the listeners were added.
//
// Durable hand-offs (an execution response into the delivery log) are not events: they must
// fail the caller's transaction, not be logged and dropped.
import type { Logger } from "./log.js";
import { errorMessage } from "./errors.js";
import type { MetricFamily } from "./lifecycle.js";

type Listener<A extends unknown[]> = (...args: A) => void | Promise<void>;

/** A failing listener is logged at most this often (it may fail on every snapshot). */
const LOG_EVERY_MS = 60_000;

interface Failures {
  count: number;
  loggedAt: number;
  since: number;
}

export class EventBus<E extends { [K in keyof E]: unknown[] }> {
  private readonly listeners = new Map<keyof E, Array<{ part: string; fn: Listener<never[]> }>>();
  private readonly failures = new Map<string, Failures>();

  constructor(private readonly log: Logger) {}

  on<K extends keyof E>(event: K, part: string, listener: Listener<E[K]>): void {
    const list = this.listeners.get(event) ?? [];
    list.push({ part, fn: listener as unknown as Listener<never[]> });
    this.listeners.set(event, list);
  }

  /** Removes every listener of `part`. */
  off(part: string): void {
    for (const [event, list] of this.listeners)
      this.listeners.set(
        event,
        list.filter((l) => l.part !== part),
      );
  }

  emit<K extends keyof E>(event: K, ...args: E[K]): void {
    for (const l of this.listeners.get(event) ?? []) {
      try {
        const r = (l.fn as unknown as Listener<E[K]>)(...args);
        if (r instanceof Promise) r.catch((e: unknown) => this.failed(l.part, event, e));
      } catch (e) {
        this.failed(l.part, event, e);
      }
    }
  }

  /** A function that emits `event`, for a part that takes a callback. */
  emitter<K extends keyof E>(event: K): (...args: E[K]) => void {
    return (...args) => this.emit(event, ...args);
  }

  private failed(part: string, event: keyof E, err: unknown): void {
    const key = `${part}\0${String(event)}`;
    const now = Date.now();
    const f = this.failures.get(key) ?? { count: 0, loggedAt: -Infinity, since: 0 };
    f.count++;
    this.failures.set(key, f);
    if (now - f.loggedAt < LOG_EVERY_MS) return;
    this.log.error(
      { listener: part, event: String(event), err: errorMessage(err), failures: f.count - f.since },
      "event listener failed; the other listeners go on",
    );
    f.loggedAt = now;
    f.since = f.count;
  }

  /** Failed listener calls so far, by part and event. */
  failureCount(part: string, event: keyof E): number {
    return this.failures.get(`${part}\0${String(event)}`)?.count ?? 0;
  }

  metrics(): MetricFamily[] {
    const values = [...this.failures].map(([key, f]) => {
      const [part = "", event = ""] = key.split("\0");
      return { labels: { part, event }, value: f.count };
    });
    return [
      {
        name: "sitegate_event_listener_failures_total",
        help: "event listener calls that threw or rejected, by the listener's part and event",
        type: "counter",
        values,
      },
    ];
  }
}
