// The uplink part: the HTTPS consumer of the delivery log and the partner's data push.
// It drains the callbacks to the partner in lanes, so that one stream never holds back
// another: the data push (from the sample store, up to 4 requests in flight), and one lane
// per kind of message in the log (execution responses in `execution`, one at a time,
// strictly oldest first). Answers are classified once (http-sender.ts classify()) and
// the lanes retry, hold or dead-letter them by the one policy of delivery/lane.ts:
// any 4xx but 408 and 429 (401 and 403 with a health warning), and a redirect to another
// origin, is final: a dead letter at once, and the lane goes on with the next message. Polling never waits on the uplink.
import type { Config } from "../config/schema.js";
import type { MetricFamily, Part } from "../lifecycle.js";
import type { Logger } from "../log.js";
import type { StoragePart } from "../storage/part.js";
import type { SampleStore, TelemetryCursor } from "../telemetry/sample-store.js";
import { backoffMs } from "../delivery/backoff.js";
import { Lane, type LaneItem, type LaneOptions, type LaneSource, type LaneStats } from "../delivery/lane.js";
import { DeliveryLog, type Route } from "../delivery/log.js";
import { LogSource } from "../delivery/log-source.js";
import { buildPayloads, type DataPushPayload } from "./data-push.js";
import { HttpSender } from "./http-sender.js";
import { HttpsSink } from "./https-sink.js";
import { HTTPS, Outbox, httpsRoute, instanceId, messageOf } from "./outbox.js";
import { SitegateError } from "../errors.js";
export { OUTBOX_MIGRATIONS } from "./outbox.js";
export type { LaneStats } from "../delivery/lane.js";

export const DATA_PUSH_LANE = "data_push";
export const DATA_PUSH_IN_FLIGHT = 4;
/** A 4xx other than 408 and 429 is final (DESIGN B6): dead-lettered at once, never holding back the next message. */
const REJECT_WINDOW_MS = 0;
const IDLE_RECHECK_MS = 2000;
/** Snapshots the data push may have handed out past the oldest one not yet settled. */
const MAX_AHEAD = 64;

export interface UplinkWarning {
  lane: string;
  code: "partner_rejects_credentials";
  status: number;
  since: string;
  message: string;
}

export interface UplinkOptions {
  /** How often an idle lane re-checks its queue for messages put there by another process. */
  idleRecheckMs?: number;
  /** The delivery log shared with the other consumers (one of its own otherwise). */
  messages?: DeliveryLog;
}

export class Uplink implements Part {
  readonly name = "uplink";
  private sink: HttpsSink | null = null;
  private sender: HttpSender | null = null;
  private lanes = new Map<string, Lane>();
  private _outbox: Outbox | null = null;
  private discover: NodeJS.Timeout | null = null;
  private readonly opts: LaneOptions;
  private readonly messages: DeliveryLog;
  private readonly push: TelemetryCursor;
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
    this.opts = { rejectWindowMs: REJECT_WINDOW_MS, idleRecheckMs: opts.idleRecheckMs ?? IDLE_RECHECK_MS };
    this.messages = opts.messages ?? new DeliveryLog(storage, (routes) => this.messagesAppended(routes));
    // The data push is the store's busiest consumer: its cursor rides in the rows.
    this.push = samples.consumer(DATA_PUSH_LANE, { inRow: true });
  }

  get dataPushUrl(): string {
    return `${this.config.partner.data_push_url.replace(/\/+$/, "")}/${this.config.api_version}/${this.config.partner.data_push_path.replace(/^\/+/, "")}`;
  }

  /** The outbox for execution responses and other messages; available after start(). */
  get outbox(): Outbox {
    if (!this._outbox) throw new SitegateError("INTERNAL", "uplink is not started");
    return this._outbox;
  }

  /**
   * Commits a callback to the log and wakes its lane (`execution_response` travels in
   * the `execution` lane, any other kind in a lane of its own). Pass `idempotencyKey` to
   * make the call idempotent across a crash: the same key is never queued twice.
   * Throws a TypeError on bad input, and if SQLite cannot commit.
   */
  enqueue(kind: string, url: string, body: unknown, opts: { idempotencyKey?: string } = {}): { id: number; idempotency_key: string } {
    if (kind === DATA_PUSH_LANE)
      throw new SitegateError("INVALID_REQUEST", "outbox: data pushes come from the sample store, not enqueue()");
    return this.messages.append(messageOf(kind, body, opts.idempotencyKey), [httpsRoute(kind, url)]);
  }

  private laneFor(name: string): Lane {
    let lane = this.lanes.get(name);
    if (!lane) {
      if (!this.sink) throw new SitegateError("INTERNAL", "uplink is not started");
      lane = new Lane(name, this.logSource(name), this.sink, this.log, this.backoff, 1, this.opts);
      this.lanes.set(name, lane);
      lane.start();
    }
    return lane;
  }

  /** A lane found empty is asked again at its idle re-check at the latest (another process may have queued). */
  private logSource(lane: string): LogSource {
    return new LogSource(this.messages, HTTPS, lane, this.opts.idleRecheckMs / 2);
  }

  start(): void {
    this.stopping = false;
    const db = this.storage.db;
    const p = this.config.partner;
    this.sender = new HttpSender({ headers: p.headers, timeoutMs: p.timeout_ms, caFile: p.ca_file });
    this.sink = new HttpsSink(this.sender);
    this._outbox = new Outbox(this.messages);
    const pushSource = new PushSource(
      this.push,
      this.logSource(DATA_PUSH_LANE),
      this._outbox,
      this.dataPushUrl,
      this.config.site_id,
      instanceId(db),
    );
    const push = new Lane(DATA_PUSH_LANE, pushSource, this.sink, this.log, this.backoff, DATA_PUSH_IN_FLIGHT, this.opts);
    this.lanes.set(DATA_PUSH_LANE, push);
    push.start();
    this.laneFor("execution");
    this.discoverLanes();
    // Another process (sitegate outbox retry) may queue messages for a lane not running yet.
    this.discover = setInterval(() => this.discoverLanes(), this.opts.idleRecheckMs);
    this.discover.unref();
    this.log.info(
      {
        data_push_url: this.dataPushUrl,
        pending_snapshots: this.samples.stats().pending_snapshots,
        outbox: this._outbox.size(),
        dead_letters: this._outbox.deadCount(),
      },
      "uplink started",
    );
  }

  /** A snapshot was appended to the sample store (`samples_appended`): the data push sends it. */
  samplesAppended(): void {
    if (!this.stopping) this.lanes.get(DATA_PUSH_LANE)?.wake();
  }

  /** A message was appended to the log (`messages_appended`); while stopped, the next start sends it. */
  messagesAppended(routes: readonly Route[]): void {
    if (this.stopping || !this.sink) return;
    for (const r of routes) if (r.consumer === HTTPS) this.laneFor(r.lane).wake();
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

  /** Callbacks waiting in the log (data pushes aside), and when the oldest was committed. */
  backlog(): { depth: number; oldest_at: string | null } {
    const outbox = this._outbox ?? new Outbox(this.messages);
    const oldest = Math.min(...outbox.oldestByLane().map((r) => r.at));
    return { depth: outbox.size(), oldest_at: Number.isFinite(oldest) ? new Date(oldest).toISOString() : null };
  }

  /** Per lane, how long the oldest message not yet accepted by the partner has waited. */
  oldestAges(now = Date.now()): Array<{ lane: string; age_s: number }> {
    if (!this._outbox) return [];
    const [snap] = this.push.pending(1);
    const age = (at: number | null | undefined) => (at == null ? 0 : Math.max(0, (now - at) / 1000));
    const byLane = new Map(this._outbox.oldestByLane().map((r) => [r.lane, r.at]));
    const lanes = new Set([...this.lanes.keys(), ...byLane.keys()]);
    lanes.delete("data_push");
    return [{ lane: "data_push", age_s: age(snap?.ts) }, ...[...lanes].sort().map((lane) => ({ lane, age_s: age(byLane.get(lane)) }))];
  }

  stats(): Record<string, LaneStats> {
    return Object.fromEntries([...this.lanes].map(([name, l]) => [name, { ...l.stats }]));
  }

  /** Warnings for /healthz: lanes whose callbacks the partner refuses for our credentials. */
  health(): { warnings: UplinkWarning[] } {
    const warnings: UplinkWarning[] = [];
    for (const [lane, l] of this.lanes) {
      const h = l.stats.credentials_rejected;
      if (h)
        warnings.push({
          lane,
          code: "partner_rejects_credentials",
          status: h.status,
          since: h.since,
          message: `the partner answers ${h.status} to the ${lane} callbacks; they go to the dead letters (kept; \`sitegate outbox retry --all\` once it accepts them): check partner.headers`,
        });
    }
    return { warnings };
  }

  metrics(): MetricFamily[] {
    const lanes = Object.entries(this.stats());
    return [
      {
        name: "sitegate_uplink_sent_total",
        help: "callbacks accepted by the partner",
        type: "counter",
        values: lanes.map(([lane, l]) => ({ labels: { lane }, value: l.sent })),
      },
      {
        name: "sitegate_uplink_failures_total",
        help: "callback attempts not accepted",
        type: "counter",
        values: lanes.map(([lane, l]) => ({ labels: { lane }, value: l.failures })),
      },
      {
        name: "sitegate_uplink_dead_letters",
        help: "callbacks the partner kept rejecting, kept for `sitegate outbox retry`",
        type: "gauge",
        values: [{ value: this.deadLetterCount() }],
      },
      {
        name: "sitegate_uplink_credentials_rejected",
        help: "1 while the partner answers 401/403 to a lane's callbacks (they go to the dead letters)",
        type: "gauge",
        values: lanes.map(([lane, l]) => ({ labels: { lane }, value: l.credentials_rejected ? 1 : 0 })),
      },
      {
        name: "sitegate_uplink_oldest_age_seconds",
        help: "age of the oldest message not yet accepted by the partner (0 when none)",
        type: "gauge",
        values: this.oldestAges().map(({ lane, age_s }) => ({ labels: { lane }, value: age_s })),
      },
    ];
  }

  /** Dead letters in the database (also those another process added). */
  deadLetterCount(): number {
    return this._outbox?.deadCount() ?? 0;
  }

  async stop(): Promise<void> {
    this.stopping = true;
    if (this.discover) clearInterval(this.discover);
    await Promise.all([...this.lanes.values()].map((l) => l.stop()));
    this.lanes.clear();
    this.samples.persistCursor();
    this.sender?.close();
  }
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
    private readonly samples: TelemetryCursor,
    /** Dead letters retried by hand come back through the log. */
    private readonly retried: LogSource,
    private readonly outbox: Outbox,
    private readonly url: string,
    private readonly siteId: string,
    private readonly instance: string,
  ) {
    this.fetchedThrough = samples.through;
  }

  next(busy: ReadonlySet<string>): LaneItem | undefined {
    const again = this.retried.next(busy);
    if (again) return again;
    const cursor = this.samples.through;
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
      address: this.url,
      kind: DATA_PUSH_LANE,
      body: p.body,
      key: p.idempotencyKey,
      describe: { snapshot: p.snapshotId, push_part: p.part },
      settle: done,
      failed: () => {},
      deadLetter: (error, attempts) => {
        this.outbox.addDeadLetter({
          lane: DATA_PUSH_LANE,
          kind: DATA_PUSH_LANE,
          url: this.url,
          body: p.body,
          idempotency_key: p.idempotencyKey,
          created_at: new Date(p.ts).toISOString(),
          attempts,
          error,
        });
        done();
      },
    };
  }

  private advance(): void {
    while (this.open.length && this.open[0].settled >= this.open[0].parts) this.samples.settleThrough(this.open.shift()!.id);
  }
}
