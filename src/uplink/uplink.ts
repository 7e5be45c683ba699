// The uplink part: drains the callbacks to the partner in lanes, so that one stream never
// holds back another: the data push (from the sample store, up to 4 requests in flight),
// and one outbox lane per kind of message (execution responses in `execution`, one at a
// time, strictly oldest first). Answers are classified once (http-sender.ts classify()):
// - any 2xx settles; 408, 429 (Retry-After honoured), 5xx, timeouts and network errors
//   are retried with backoff (1 s doubling to 5 min, jittered) for as long as it takes;
// - 401 and 403 hold the lane (every message would fail the same way) and raise a health
//   warning until an answer gets through; nothing is dropped;
// - any other answer is retried for at most `rejectWindowMs` (one hour), then the
//   message becomes a dead letter (SQLite) and the lane goes on.
// Event-driven: a lane sleeps until the store or the outbox has something new, and
// re-checks its queue every couple of seconds for what another process (`sitegate
// outbox retry`) put there. Polling never waits on the uplink.
import type { Config } from "../config/schema.js";
import type { Part } from "../lifecycle.js";
import type { Logger } from "../log.js";
import type { StoragePart } from "../storage/part.js";
import type { SampleStore } from "../telemetry/sample-store.js";
import { backoffMs } from "./backoff.js";
import { buildPayloads, type DataPushPayload } from "./data-push.js";
import { HttpSender, classify, type SendResult } from "./http-sender.js";
import { Outbox, instanceId, laneOf, type OutboxMessage } from "./outbox.js";
export { OUTBOX_MIGRATIONS } from "./outbox.js";

export const DATA_PUSH_LANE = "data_push";
export const DATA_PUSH_IN_FLIGHT = 4;
export const REJECT_WINDOW_MS = 3_600_000;
const IDLE_RECHECK_MS = 2000;
/** Snapshots the data push may have handed out past the oldest one not yet settled. */
const MAX_AHEAD = 64;

interface LaneItem {
  /** Unique within its lane while it is queued. */
  ref: string;
  url: string;
  body: string;
  key: string;
  describe: Record<string, unknown>;
  settle(): void;
  failed(error: string): void;
  deadLetter(error: string, attempts: number): void;
}

interface LaneSource {
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
  held: { status: number; since: string } | null;
}

export interface UplinkWarning {
  lane: string;
  code: "partner_rejects_credentials";
  status: number;
  since: string;
  message: string;
}

export interface UplinkOptions {
  /** How long a message the partner rejects (4xx other than 401/403/408/429) is retried before it is dead-lettered. */
  rejectWindowMs?: number;
  /** How often an idle lane re-checks its queue for messages put there by another process. */
  idleRecheckMs?: number;
}

/** One stream of callbacks with its own backoff and up to `window` requests in flight. */
class Lane {
  readonly stats: LaneStats = { sent: 0, failures: 0, dead_lettered: 0, attempt: 0, in_flight: 0, last_error: null, last_sent_at: null, held: null };
  private stopped = false;
  private running: Promise<void> | null = null;
  private readonly inflight = new Map<string, Promise<void>>();
  private retryQueue: Array<{ seq: number; item: LaneItem }> = [];
  private readonly attempts = new Map<string, number>();
  private readonly rejectedSince = new Map<string, number>();
  private readonly seqOf = new Map<string, number>();
  private seq = 0;
  private pauseUntil = 0;
  private signal: (() => void) | null = null;

  constructor(
    readonly name: string,
    private readonly source: LaneSource,
    private readonly sender: HttpSender,
    private readonly log: Logger,
    private readonly backoff: (attempt: number) => number,
    private readonly window: number,
    private readonly opts: Required<UplinkOptions>,
  ) {}

  start(): void {
    this.running = this.loop();
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

  private busy(): Set<string> {
    const s = new Set(this.inflight.keys());
    for (const r of this.retryQueue) s.add(r.item.ref);
    return s;
  }

  private async loop(): Promise<void> {
    while (!this.stopped) {
      const now = performance.now();
      if (now >= this.pauseUntil) {
        while (this.inflight.size < this.window) {
          let item = this.retryQueue.shift()?.item;
          // While a message is failing, only the failing ones are tried: nothing new runs
          // ahead of them (bounded look-ahead, and the backlog stays in order).
          if (!item && this.attempts.size === 0) {
            try {
              item = this.source.next(this.busy());
            } catch (e) {
              this.log.error({ err: e, lane: this.name }, "cannot read the queue");
              this.pauseUntil = performance.now() + 5000;
              break;
            }
          }
          if (!item) break;
          this.dispatch(item);
          // While the partner rejects our credentials, one request probes at a time.
          if (this.stats.held) break;
        }
      }
      if (this.stopped) break;
      const paused = this.pauseUntil - performance.now();
      const full = this.inflight.size >= this.window || (this.stats.held !== null && this.inflight.size > 0);
      await this.wait(paused > 0 ? paused : full ? null : this.opts.idleRecheckMs);
    }
    await Promise.allSettled([...this.inflight.values()]);
  }

  private dispatch(item: LaneItem): void {
    if (!this.seqOf.has(item.ref)) this.seqOf.set(item.ref, this.seq++);
    // The in-flight entry goes in the same step as the result is booked: a retry
    // dispatched right after (a Retry-After of 0) must not lose its own entry.
    const p = this.sender.post(item.url, item.body, item.key).then((r) => {
      this.inflight.delete(item.ref);
      try {
        this.onResult(item, r);
      } catch (e) {
        this.log.error({ err: e, lane: this.name, ...item.describe }, "callback bookkeeping failed");
      }
      this.stats.in_flight = this.inflight.size;
      this.wake();
    });
    this.inflight.set(item.ref, p);
    this.stats.in_flight = this.inflight.size;
  }

  private forget(ref: string): void {
    this.attempts.delete(ref);
    this.rejectedSince.delete(ref);
    this.seqOf.delete(ref);
  }

  private onResult(item: LaneItem, r: SendResult): void {
    const outcome = classify(r);
    if (outcome === "ok") {
      item.settle();
      this.forget(item.ref);
      this.stats.sent++;
      this.stats.attempt = 0;
      this.stats.last_sent_at = new Date().toISOString();
      if (this.stats.held) {
        this.log.info({ lane: this.name, held_since: this.stats.held.since }, "the partner accepts our callbacks again");
        this.stats.held = null;
      }
      return;
    }
    if (this.stopped) return; // not settled: it stays queued for the next start
    const attempt = (this.attempts.get(item.ref) ?? 0) + 1;
    this.attempts.set(item.ref, attempt);
    this.stats.failures++;
    this.stats.attempt = attempt;
    const error = r.error ?? "failed";
    this.stats.last_error = error;
    if (outcome === "auth" && !this.stats.held) {
      this.stats.held = { status: r.status ?? 0, since: new Date().toISOString() };
      this.log.error({ lane: this.name, status: r.status, ...item.describe }, "the partner rejects our credentials; the lane holds until it accepts them (check partner.headers)");
    }
    if (outcome === "rejected") {
      const now = Date.now();
      const since = this.rejectedSince.get(item.ref) ?? now;
      this.rejectedSince.set(item.ref, since);
      if (now - since >= this.opts.rejectWindowMs) {
        item.deadLetter(error, attempt);
        this.forget(item.ref);
        this.stats.dead_lettered++;
        this.log.error({ lane: this.name, ...item.describe, error, attempts: attempt }, "the partner kept rejecting a callback: moved to the dead letters (sitegate outbox)");
        return;
      }
    }
    try {
      item.failed(error);
    } catch (e) {
      this.log.warn({ err: e, lane: this.name }, "cannot record the failed attempt");
    }
    const delay = r.retryAfterMs !== undefined && outcome === "transient" ? Math.min(r.retryAfterMs, 3_600_000) : this.backoff(attempt);
    this.pauseUntil = Math.max(this.pauseUntil, performance.now() + delay);
    const seq = this.seqOf.get(item.ref) ?? 0;
    this.retryQueue.push({ seq, item });
    this.retryQueue.sort((a, b) => a.seq - b.seq);
    this.log.warn({ lane: this.name, ...item.describe, error, outcome, attempt, retry_in_ms: delay }, "callback not accepted; will retry");
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.wake();
    await this.running;
  }
}

export class Uplink implements Part {
  readonly name = "uplink";
  private sender: HttpSender | null = null;
  private lanes = new Map<string, Lane>();
  private unsubscribe: (() => void) | null = null;
  private _outbox: Outbox | null = null;
  private discover: NodeJS.Timeout | null = null;
  private readonly opts: Required<UplinkOptions>;
  private stopping = false;

  constructor(
    private readonly config: Config,
    private readonly storage: StoragePart,
    private readonly samples: SampleStore,
    private readonly log: Logger,
    /** Tests shorten the retry schedule; production uses 1 s doubling to 5 min. */
    private readonly backoff: (attempt: number) => number = backoffMs,
    opts: UplinkOptions = {},
  ) {
    this.opts = { rejectWindowMs: opts.rejectWindowMs ?? REJECT_WINDOW_MS, idleRecheckMs: opts.idleRecheckMs ?? IDLE_RECHECK_MS };
  }

  get dataPushUrl(): string {
    return `${this.config.partner.data_push_url.replace(/\/+$/, "")}/${this.config.api_version}/${this.config.partner.data_push_path.replace(/^\/+/, "")}`;
  }

  /** The outbox for execution responses and other messages; available after start(). */
  get outbox(): Outbox {
    if (!this._outbox) throw new Error("uplink is not started");
    return this._outbox;
  }

  /**
   * Commits a callback to the outbox and wakes its lane (`execution_response` travels in
   * the `execution` lane, any other kind in a lane of its own). Pass `idempotencyKey` to
   * make the call idempotent across a crash: the same key is never queued twice.
   * Throws a TypeError on bad input, and if SQLite cannot commit.
   */
  enqueue(kind: string, url: string, body: unknown, opts: { idempotencyKey?: string } = {}): { id: number; idempotency_key: string } {
    if (kind === DATA_PUSH_LANE) throw new TypeError("outbox: data pushes come from the sample store, not enqueue()");
    const r = this.outbox.enqueue(kind, url, body, opts);
    // Committed either way; while stopping, the next start sends it.
    if (!this.stopping) this.laneFor(laneOf(kind)).wake();
    return r;
  }

  private laneFor(name: string): Lane {
    let lane = this.lanes.get(name);
    if (!lane) {
      if (!this.sender || !this._outbox) throw new Error("uplink is not started");
      lane = new Lane(name, this.outboxSource(name), this.sender, this.log, this.backoff, 1, this.opts);
      this.lanes.set(name, lane);
      lane.start();
    }
    return lane;
  }

  private outboxSource(lane: string): LaneSource {
    const outbox = this.outbox;
    return {
      next(busy) {
        for (const m of outbox.heads(lane, busy.size + 1)) if (!busy.has(`o${m.id}`)) return outboxItem(outbox, m);
        return undefined;
      },
    };
  }

  start(): void {
    this.stopping = false;
    const db = this.storage.db;
    const p = this.config.partner;
    this.sender = new HttpSender({ headers: p.headers, timeoutMs: p.timeout_ms, caFile: p.ca_file });
    this._outbox = new Outbox(db);
    const push = new Lane(DATA_PUSH_LANE, new PushSource(this.samples, this._outbox, this.dataPushUrl, this.config.site_id, instanceId(db)), this.sender, this.log, this.backoff, DATA_PUSH_IN_FLIGHT, this.opts);
    this.lanes.set(DATA_PUSH_LANE, push);
    push.start();
    this.laneFor("execution");
    this.discoverLanes();
    // Another process (sitegate outbox retry) may queue messages for a lane not running yet.
    this.discover = setInterval(() => this.discoverLanes(), this.opts.idleRecheckMs);
    this.discover.unref();
    this.unsubscribe = this.samples.onAppend(() => push.wake());
    this.log.info({ data_push_url: this.dataPushUrl, pending_snapshots: this.samples.stats().pending_snapshots, outbox: this._outbox.size(), dead_letters: this._outbox.deadCount() }, "uplink started");
  }

  private discoverLanes(): void {
    try {
      if (this.stopping) return;
      for (const name of this.outbox.lanes()) if (!this.lanes.has(name)) this.laneFor(name);
    } catch (e) {
      this.log.warn({ err: e }, "cannot list the outbox lanes");
    }
  }

  /** Messages in the outbox (0 before start). */
  outboxDepth(): number {
    return this._outbox?.size() ?? 0;
  }

  /** Per lane, how long the oldest message not yet accepted by the partner has waited. */
  oldestAges(now = Date.now()): Array<{ lane: string; age_s: number }> {
    if (!this._outbox) return [];
    const [snap] = this.samples.pending(1);
    const age = (at: number | null | undefined) => (at == null ? 0 : Math.max(0, (now - at) / 1000));
    const byLane = new Map(this._outbox.oldestByLane().map((r) => [r.lane, r.at]));
    const lanes = new Set([...this.lanes.keys(), ...byLane.keys()]);
    lanes.delete("data_push");
    return [{ lane: "data_push", age_s: age(snap?.ts) }, ...[...lanes].sort().map((lane) => ({ lane, age_s: age(byLane.get(lane)) }))];
  }

  stats(): Record<string, LaneStats> {
    return Object.fromEntries([...this.lanes].map(([name, l]) => [name, { ...l.stats }]));
  }

  /** Warnings for /healthz: lanes held because the partner rejects our credentials. */
  health(): { warnings: UplinkWarning[] } {
    const warnings: UplinkWarning[] = [];
    for (const [lane, l] of this.lanes) {
      const h = l.stats.held;
      if (h) warnings.push({ lane, code: "partner_rejects_credentials", status: h.status, since: h.since, message: `the partner answers ${h.status} to the ${lane} callbacks; they are held (nothing dropped) until it accepts them: check partner.headers` });
    }
    return { warnings };
  }

  /** Dead letters in the database (also those another process added). */
  deadLetterCount(): number {
    return this._outbox?.deadCount() ?? 0;
  }

  async stop(): Promise<void> {
    this.stopping = true;
    this.unsubscribe?.();
    if (this.discover) clearInterval(this.discover);
    await Promise.all([...this.lanes.values()].map((l) => l.stop()));
    this.lanes.clear();
    this.samples.persistCursor();
    this.sender?.close();
  }
}

function outboxItem(outbox: Outbox, m: OutboxMessage): LaneItem {
  return {
    ref: `o${m.id}`,
    url: m.url,
    body: m.body,
    key: m.idempotency_key,
    describe: { message: m.id, kind: m.kind },
    settle: () => outbox.settle(m.id),
    failed: (error) => outbox.recordFailure(m.id, error),
    deadLetter: (error) => outbox.deadLetter(m.id, error),
  };
}

/**
 * The data-push queue: dead letters put back by hand first (outbox lane data_push), then
 * the snapshots after the push cursor, each split into payloads. Several may be in
 * flight; the cursor moves only over the contiguous prefix of settled snapshots, so a
 * crash re-sends (with the same keys) what was not settled, never skips it.
 */
class PushSource implements LaneSource {
  private buffer: DataPushPayload[] = [];
  private fetchedThrough: number;
  /** Snapshots handed out, oldest first, with how many of their parts are settled. */
  private open: Array<{ id: number; parts: number; settled: number }> = [];

  constructor(
    private readonly samples: SampleStore,
    private readonly outbox: Outbox,
    private readonly url: string,
    private readonly siteId: string,
    private readonly instance: string,
  ) {
    this.fetchedThrough = samples.pushCursor;
  }

  next(busy: ReadonlySet<string>): LaneItem | undefined {
    for (const m of this.outbox.heads(DATA_PUSH_LANE, busy.size + 1)) if (!busy.has(`o${m.id}`)) return outboxItem(this.outbox, m);
    const cursor = this.samples.pushCursor;
    // The retention bound may have dropped unsent snapshots: forget them here too.
    if (this.fetchedThrough < cursor) this.fetchedThrough = cursor;
    if (this.buffer.length && this.buffer[0].snapshotId <= cursor) this.buffer = this.buffer.filter((p) => p.snapshotId > cursor);
    while (this.open.length && this.open[0].id <= cursor) this.open.shift();
    // A slow failure (a timeout) lets newer pushes pass it; bound how far they run ahead.
    if (this.buffer.length === 0 && this.open.length < MAX_AHEAD) {
      for (const s of this.samples.pending(DATA_PUSH_IN_FLIGHT, this.fetchedThrough)) {
        const parts = buildPayloads(s, this.siteId, this.instance);
        this.fetchedThrough = s.id;
        this.open.push({ id: s.id, parts: parts.length, settled: 0 });
        this.buffer.push(...parts);
      }
      this.advance();
    }
    const p = this.buffer.shift();
    if (!p) return undefined;
    const entry = this.open.find((o) => o.id === p.snapshotId);
    const done = () => {
      if (entry) entry.settled++;
      this.advance();
    };
    return {
      ref: `s${p.snapshotId}:${p.part}`,
      url: this.url,
      body: p.body,
      key: p.idempotencyKey,
      describe: { snapshot: p.snapshotId, part: p.part },
      settle: done,
      failed: () => {},
      deadLetter: (error, attempts) => {
        this.outbox.addDeadLetter({ lane: DATA_PUSH_LANE, kind: DATA_PUSH_LANE, url: this.url, body: p.body, idempotency_key: p.idempotencyKey, created_at: new Date(p.ts).toISOString(), attempts, error });
        done();
      },
    };
  }

  private advance(): void {
    while (this.open.length && this.open[0].settled >= this.open[0].parts) this.samples.settleThrough(this.open.shift()!.id);
  }
}
