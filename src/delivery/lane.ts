// One lane of the delivery core: a stream of messages from a source (the log, the sample
// store) to a sink (HTTPS, MQTT), up to `window` in flight, and the one retry policy of
// every sink: the sink says what an attempt came to (ok, transient, auth, rejected), the
// lane settles, retries (transient), holds (auth: 401/403/404) or dead-letters (rejected). It sleeps until woken, and re-checks its
// source every couple of seconds. This is the only in-flight window in the daemon: the
// partner's callbacks and data push, the fleet's events and telemetry all run in lanes;
// their cursors move by the one policy of settle-order.ts. The policy and why: docs/delivery.md.
import type { Logger } from "../log.js";

export type Outcome = "ok" | "transient" | "auth" | "rejected";

/** What one attempt came to, as the sink classified it. */
export interface Attempt {
  outcome: Outcome;
  status?: number;
  error?: string;
  /** The receiver asked for this pause (a 429's or 503's Retry-After), for `transient`. */
  retryAfterMs?: number;
  /** What to check when the receiver rejects our credentials. */
  hint?: string;
}

/** Where a lane's messages go: one strategy per transport. */
export interface Sink {
  /** False while the transport cannot take anything new (MQTT disconnected). */
  ready(): boolean;
  /** Calls `done` once with what the attempt came to (a callback, not a promise: the fleet's telemetry runs thousands a second). */
  send(item: LaneItem, done: (a: Attempt) => void): void;
}

export interface LaneItem {
  /** Unique within its lane while it is queued. */
  ref: string;
  /** A URL or a topic, as the sink reads it. */
  address: string;
  kind: string;
  body: string;
  key: string;
  describe: Record<string, unknown>;
  settle(): void;
  failed(error: string): void;
  deadLetter(error: string, attempts: number): void;
}

export interface LaneSource {
  /** The oldest item not in `busy` (in flight or waiting for a retry), if any. */
  next(busy: ReadonlySet<string>): LaneItem | undefined;
}

export interface LaneStats {
  sent: number;
  failures: number;
  dead_lettered: number;
  attempt: number;
  in_flight: number;
  last_error: string | null;
  last_sent_at: string | null;
  /** Since when the receiver answers 401/403/404: a warning while the lane is held (nothing is dead-lettered). */
  credentials_rejected: { status: number; since: string } | null;
  /** Answers 401/403/404 the lane has met since it started (each held the lane for one backoff). */
  credentials_rejections: number;
}

export interface LaneOptions {
  /** How long a message the receiver rejects is retried before it is dead-lettered: 0 dead-letters it at once. */
  rejectWindowMs: number;
  /** How often an idle lane re-checks its source for messages put there by another process. */
  idleRecheckMs: number;
}

/** One stream of messages to one sink, with its own backoff and up to `window` in flight. */
export class Lane {
  private readonly counters: LaneStats = {
    sent: 0,
    failures: 0,
    dead_lettered: 0,
    attempt: 0,
    in_flight: 0,
    last_error: null,
    last_sent_at: null,
    credentials_rejected: null,
    credentials_rejections: 0,
  };
  /** When the last message was settled (ms since the epoch; formatted only when read). */
  private lastSentAt = 0;
  private wakeQueued = false;
  private stopped = false;
  private running: Promise<void> | null = null;
  private inflight = 0;
  /** In flight or waiting for a retry: what the source must not hand out again. */
  private readonly busy = new Set<string>();
  private drained: (() => void) | null = null;
  private retryQueue: Array<{ seq: number; item: LaneItem }> = [];
  private readonly attempts = new Map<string, number>();
  private readonly rejectedSince = new Map<string, number>();
  private seq = 0;
  private pauseUntil = 0;
  private signal: (() => void) | null = null;

  constructor(
    readonly name: string,
    private readonly source: LaneSource,
    private readonly sink: Sink,
    private readonly log: Logger,
    /** The delay before retry `attempt` of a message to `address` (util/reconnect-backoff.ts laneRetryDelay). */
    private readonly backoff: (attempt: number, address: string) => number,
    private window: number,
    private readonly opts: LaneOptions,
  ) {}

  start(): void {
    this.running = this.loop();
  }

  get stats(): LaneStats {
    if (this.lastSentAt) this.counters.last_sent_at = new Date(this.lastSentAt).toISOString();
    return this.counters;
  }

  /** In flight at most (the lane's window: the one the fleet reports as its telemetry window). */
  get windowSize(): number {
    return this.window;
  }

  /** In flight at most from now on (the fleet's follows the broker's Receive Maximum). */
  resize(window: number): void {
    this.window = Math.max(1, window);
    this.wake();
  }

  /** Something new may be queued; a backoff in progress is not cut short. */
  wake(): void {
    const s = this.signal;
    this.signal = null;
    s?.();
  }

  private wait(ms: number | null): Promise<void> {
    return new Promise((resolve) => {
      const timer = ms === null ? null : setTimeout(() => this.wake(), Math.max(0, ms));
      this.signal = () => {
        if (timer) clearTimeout(timer);
        resolve();
      };
    });
  }

  private async loop(): Promise<void> {
    while (!this.stopped) {
      const now = performance.now();
      if (now >= this.pauseUntil && this.sink.ready()) {
        // A sink may answer at once (within send): a failure's pause stops this round too.
        while (this.inflight < this.window && this.pauseUntil <= now) {
          const retry = this.retryQueue.shift();
          let item = retry?.item;
          // While a message is failing, only the failing ones are tried: nothing new runs
          // ahead of them (bounded look-ahead, and the backlog stays in order).
          if (!item && this.attempts.size === 0) {
            try {
              item = this.source.next(this.busy);
            } catch (e) {
              this.log.error({ err: e, lane: this.name }, "cannot read the queue");
              this.pauseUntil = performance.now() + 5000;
              break;
            }
          }
          if (!item) break;
          this.dispatch(item, retry?.seq ?? this.seq++);
        }
      }
      if (this.stopped) break;
      const paused = this.pauseUntil - performance.now();
      const full = this.inflight >= this.window;
      // A retry whose pause is already over (a sink that answered within send) goes next turn.
      const due = !full && this.retryQueue.length > 0 && this.sink.ready();
      await this.wait(paused > 0 ? paused : full ? null : due ? 0 : this.opts.idleRecheckMs);
    }
    if (this.inflight) await new Promise<void>((resolve) => (this.drained = resolve));
  }

  /** `seq`: the item's place in the lane's order, kept across its retries (they go oldest first). */
  private dispatch(item: LaneItem, seq: number): void {
    this.busy.add(item.ref);
    this.counters.in_flight = ++this.inflight;
    let answered = false;
    this.sink.send(item, (r) => {
      if (answered) return;
      answered = true;
      // The count goes down in the same step as the result is booked: a retry dispatched
      // right after (a Retry-After of 0) is counted on its own.
      this.inflight--;
      try {
        this.onResult(item, r, seq);
      } catch (e) {
        this.log.error({ err: e, lane: this.name, ...item.describe }, "delivery bookkeeping failed");
      }
      this.counters.in_flight = this.inflight;
      if (this.inflight === 0 && this.drained) this.drained();
      this.wakeAfterAnswers();
    });
  }

  /**
   * The answers that arrive together (the PUBACKs of one read from the socket) refill the
   * window once, after all of them, so that the next sends leave in one write.
   */
  private wakeAfterAnswers(): void {
    if (this.wakeQueued) return;
    this.wakeQueued = true;
    setImmediate(() => {
      this.wakeQueued = false;
      this.wake();
    });
  }

  private forget(ref: string): void {
    this.busy.delete(ref);
    if (this.attempts.size === 0) return;
    this.attempts.delete(ref);
    this.rejectedSince.delete(ref);
  }

  private onResult(item: LaneItem, r: Attempt, seq: number): void {
    const outcome = r.outcome;
    if (outcome === "ok") {
      item.settle();
      this.forget(item.ref);
      this.counters.sent++;
      this.counters.attempt = 0;
      this.lastSentAt = Date.now();
      if (this.counters.credentials_rejected) {
        this.log.info(
          { lane: this.name, rejected_since: this.counters.credentials_rejected.since },
          "the receiver accepts our messages again",
        );
        this.counters.credentials_rejected = null;
      }
      return;
    }
    if (this.stopped) return; // not settled: it stays queued for the next start
    const attempt = (this.attempts.get(item.ref) ?? 0) + 1;
    this.attempts.set(item.ref, attempt);
    this.counters.failures++;
    this.counters.attempt = attempt;
    const error = r.error ?? "failed";
    this.counters.last_error = error;
    if (outcome === "auth") this.credentialsRejected(item, r);
    // A final refusal: this message, not the endpoint. 401/403/404 ("auth") hold the lane
    // instead, with the transient backoff, until the partner answers 2xx (DESIGN B6).
    if (outcome === "rejected") {
      const now = Date.now();
      const since = this.rejectedSince.get(item.ref) ?? now;
      this.rejectedSince.set(item.ref, since);
      if (now - since >= this.opts.rejectWindowMs) {
        item.deadLetter(error, attempt);
        this.forget(item.ref);
        this.counters.dead_lettered++;
        this.log.error(
          { lane: this.name, ...item.describe, error, attempts: attempt },
          this.opts.rejectWindowMs === 0
            ? "the receiver refused a message for good: moved to the dead letters (sitegate outbox); the lane goes on"
            : "the receiver kept rejecting a message: moved to the dead letters (sitegate outbox)",
        );
        return;
      }
    }
    try {
      item.failed(error);
    } catch (e) {
      this.log.warn({ err: e, lane: this.name }, "cannot record the failed attempt");
    }
    const delay =
      r.retryAfterMs !== undefined && outcome === "transient" ? Math.min(r.retryAfterMs, 3_600_000) : this.backoff(attempt, item.address);
    this.pauseUntil = Math.max(this.pauseUntil, performance.now() + delay);
    this.retryQueue.push({ seq, item });
    this.retryQueue.sort((a, b) => a.seq - b.seq);
    this.log.warn({ lane: this.name, ...item.describe, error, outcome, attempt, retry_in_ms: delay }, "message not accepted; will retry");
  }

  /** A 401/403/404: the endpoint or our credentials are wrong, not the message; counted, and warned once per spell. */
  private credentialsRejected(item: LaneItem, r: Attempt): void {
    this.counters.credentials_rejections++;
    if (this.counters.credentials_rejected) return;
    this.counters.credentials_rejected = { status: r.status ?? 0, since: new Date().toISOString() };
    this.log.error(
      { lane: this.name, status: r.status, ...item.describe },
      `the receiver rejects our credentials or the endpoint; the lane holds (retried with backoff, nothing dead-lettered) until it accepts them${r.hint ? ` (${r.hint})` : ""}`,
    );
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.wake();
    await this.running;
  }
}
