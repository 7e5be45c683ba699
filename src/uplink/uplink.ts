// The uplink part: the HTTPS consumer of the delivery log and the partner's data push.
// It drains the callbacks to the partner in lanes, so that one stream never holds back
// another: the data push (from the sample store, up to 4 requests in flight), and one lane
// per kind of message in the log (execution responses in `execution`, one at a time,
// strictly oldest first). Answers are classified once (http-sender.ts classify()) and
// the lanes retry, hold or dead-letter them by the one policy of delivery/lane.ts:
// 401, 403 and 404 hold the lane with the retry backoff and a health warning (the endpoint
// or our credentials are wrong, not the message), and it drains in order once the partner
// answers 2xx; any other 4xx but 408 and 429, and a redirect to another origin, is final:
// a dead letter at once, and the lane goes on with the next message. Polling never waits on the uplink.
import type { Config } from "../config/schema.js";
import type { MetricFamily, Part } from "../lifecycle.js";
import type { Logger } from "../log.js";
import type { StoragePart } from "../storage/part.js";
import type { SampleStore, TelemetryCursor } from "../telemetry/sample-store.js";
import type { Lane, LaneOptions, LaneStats } from "../delivery/lane.js";
import { LaneGroup } from "../delivery/lane-group.js";
import { DeliveryLog, type Route } from "../delivery/log.js";
import { LogSource } from "../delivery/log-source.js";
import { SnapshotSource } from "../delivery/snapshot-source.js";
import { DataPushWriter } from "./data-push.js";
import { HttpSender } from "./http-sender.js";
import { HttpsSink } from "./https-sink.js";
import { HTTPS, instanceId } from "./callbacks.js";
import { SitegateError } from "../errors.js";
import { laneRetryDelay } from "../util/reconnect-backoff.js";
export { UPLINK_MIGRATIONS } from "./callbacks.js";
export type { LaneStats } from "../delivery/lane.js";

export const DATA_PUSH_LANE = "data_push";
export const DATA_PUSH_IN_FLIGHT = 4;
/** A 4xx other than 401, 403, 404, 408 and 429 is final (DESIGN B6): dead-lettered at once, never holding back the next message. */
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
  deliveryLog?: DeliveryLog;
}

export class Uplink implements Part {
  readonly name = "uplink";
  private sink: HttpsSink | null = null;
  private sender: HttpSender | null = null;
  /** The lanes into the sink, while started. */
  private lanes: LaneGroup | null = null;
  private discover: NodeJS.Timeout | null = null;
  private readonly opts: LaneOptions;
  /** The delivery log; its consumer `https` is the partner's callbacks. */
  readonly deliveryLog: DeliveryLog;
  private readonly push: TelemetryCursor;
  private stopping = false;

  constructor(
    private readonly config: Config,
    private readonly storage: StoragePart,
    private readonly samples: SampleStore,
    private readonly log: Logger,
    /** Tests shorten the retry schedule; production uses the one backoff policy (util/reconnect-backoff.ts). */
    private readonly backoff: (attempt: number, address: string) => number = laneRetryDelay,
    opts: UplinkOptions = {},
  ) {
    this.opts = { rejectWindowMs: REJECT_WINDOW_MS, idleRecheckMs: opts.idleRecheckMs ?? IDLE_RECHECK_MS };
    this.deliveryLog = opts.deliveryLog ?? new DeliveryLog(storage, (routes) => this.messagesAppended(routes));
    // The data push is the store's busiest consumer: its cursor rides in the rows.
    this.push = samples.consumer(DATA_PUSH_LANE, { inRow: true });
  }

  get dataPushUrl(): string {
    return `${this.config.partner.data_push_url.replace(/\/+$/, "")}/${this.config.api_version}/${this.config.partner.data_push_path.replace(/^\/+/, "")}`;
  }

  private laneFor(name: string): Lane {
    if (!this.lanes) throw new SitegateError("INTERNAL", "uplink is not started");
    return this.lanes.get(name) ?? this.lanes.open(name, this.logSource(name));
  }

  /** A lane found empty is asked again at its idle re-check at the latest (another process may have queued). */
  private logSource(lane: string): LogSource {
    return new LogSource(this.deliveryLog, HTTPS, lane, this.opts.idleRecheckMs / 2);
  }

  start(): void {
    this.stopping = false;
    const db = this.storage.db;
    const p = this.config.partner;
    this.sender = new HttpSender({ headers: p.headers, timeoutMs: p.timeout_ms, caFile: p.ca_file });
    this.sink = new HttpsSink(this.sender);
    const instance = instanceId(db);
    const writer = new DataPushWriter(this.config.site_id, () => instance);
    const url = this.dataPushUrl;
    const pushSource = new SnapshotSource(this.push, {
      kind: DATA_PUSH_LANE,
      address: url,
      encode: (snap) => writer.encode(snap),
      batch: DATA_PUSH_IN_FLIGHT,
      maxAhead: MAX_AHEAD,
      // A data push was never in the log: its dead letter is written there, and comes back through it when retried.
      deadLetter: (p, error, attempts) =>
        this.deliveryLog.deadLetter(
          {
            consumer: HTTPS,
            lane: DATA_PUSH_LANE,
            kind: DATA_PUSH_LANE,
            address: url,
            body: p.body,
            idempotency_key: p.key,
            created_at: new Date(p.ts).toISOString(),
            attempts,
          },
          error,
        ),
      before: this.logSource(DATA_PUSH_LANE),
    });
    this.lanes = new LaneGroup(this.sink, this.log, this.backoff, this.opts);
    this.lanes.open(DATA_PUSH_LANE, pushSource, DATA_PUSH_IN_FLIGHT);
    this.laneFor("execution");
    this.discoverLanes();
    // Another process (sitegate outbox retry) may queue messages for a lane not running yet.
    this.discover = setInterval(() => this.discoverLanes(), this.opts.idleRecheckMs);
    this.discover.unref();
    this.log.info(
      {
        data_push_url: this.dataPushUrl,
        pending_snapshots: this.samples.stats().pending_snapshots,
        callbacks: this.deliveryLog.size(HTTPS),
        dead_letters: this.deliveryLog.deadCount(HTTPS),
      },
      "uplink started",
    );
  }

  /** A snapshot was appended to the sample store (`samples_appended`): the data push sends it. */
  samplesAppended(): void {
    if (!this.stopping) this.lanes?.get(DATA_PUSH_LANE)?.wake();
  }

  /** A message was appended to the log (`messages_appended`); while stopped, the next start sends it. */
  messagesAppended(routes: readonly Route[]): void {
    if (!this.stopping) this.lanes?.wakeRoutes(routes, HTTPS, (lane) => this.logSource(lane));
  }

  private discoverLanes(): void {
    try {
      if (this.stopping || !this.lanes) return;
      for (const name of this.deliveryLog.lanes(HTTPS)) this.laneFor(name);
    } catch (e) {
      this.log.warn({ err: e }, "cannot list the callback lanes");
    }
  }

  /** Callbacks waiting in the log (0 before start). */
  pendingMessages(): number {
    return this.sink ? this.deliveryLog.size(HTTPS) : 0;
  }

  /** Callbacks waiting in the log (data pushes aside), and when the oldest was committed. */
  backlog(): { depth: number; oldest_at: string | null } {
    const oldest = Math.min(...this.deliveryLog.oldestByLane(HTTPS).map((r) => r.at));
    return { depth: this.deliveryLog.size(HTTPS), oldest_at: Number.isFinite(oldest) ? new Date(oldest).toISOString() : null };
  }

  /** Per lane, how long the oldest message not yet accepted by the partner has waited. */
  oldestAges(now = Date.now()): Array<{ lane: string; age_s: number }> {
    if (!this.sink) return [];
    const [snap] = this.push.pending(1);
    const age = (at: number | null | undefined) => (at == null ? 0 : Math.max(0, (now - at) / 1000));
    const byLane = new Map(this.deliveryLog.oldestByLane(HTTPS).map((r) => [r.lane, r.at]));
    const lanes = new Set([...(this.lanes?.names() ?? []), ...byLane.keys()]);
    lanes.delete("data_push");
    return [{ lane: "data_push", age_s: age(snap?.ts) }, ...[...lanes].sort().map((lane) => ({ lane, age_s: age(byLane.get(lane)) }))];
  }

  stats(): Record<string, LaneStats> {
    return this.lanes?.stats() ?? {};
  }

  /** Warnings for /healthz: lanes held because the partner answers 401/403/404. */
  health(): { warnings: UplinkWarning[] } {
    const warnings: UplinkWarning[] = [];
    for (const [lane, l] of Object.entries(this.stats())) {
      const h = l.credentials_rejected;
      if (h)
        warnings.push({
          lane,
          code: "partner_rejects_credentials",
          status: h.status,
          since: h.since,
          message: `the partner answers ${h.status} to the ${lane} callbacks; the lane holds them (retried with backoff, nothing dead-lettered) and drains in order once it accepts them: check partner.headers and the partner URLs`,
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
        help: "1 while the partner answers 401/403/404 to a lane's callbacks (the lane holds them until it answers 2xx)",
        type: "gauge",
        values: lanes.map(([lane, l]) => ({ labels: { lane }, value: l.credentials_rejected ? 1 : 0 })),
      },
      {
        name: "sitegate_uplink_credentials_rejected_total",
        help: "answers 401/403/404 a lane met (each held the lane for one backoff)",
        type: "counter",
        values: lanes.map(([lane, l]) => ({ labels: { lane }, value: l.credentials_rejections })),
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
    return this.sink ? this.deliveryLog.deadCount(HTTPS) : 0;
  }

  async stop(): Promise<void> {
    this.stopping = true;
    if (this.discover) clearInterval(this.discover);
    await this.lanes?.stop();
    this.lanes = null;
    this.samples.persistCursor();
    this.sender?.close();
  }
}
