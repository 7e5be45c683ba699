// The uplink part: drains the callbacks to the partner, each kind in its own lane so a
// failing data-push endpoint never holds back execution responses. Within a lane,
// strictly oldest first; a failure backs the lane off (1 s doubling to 5 min, jittered)
// and retries the same message with the same Idempotency-Key. Event-driven: a lane
// sleeps until the store or the outbox has something new; polling never waits on it.
import type { Config } from "../config/schema.js";
import type { Part } from "../lifecycle.js";
import type { Logger } from "../log.js";
import type { StoragePart } from "../storage/part.js";
import type { SampleStore } from "../telemetry/sample-store.js";
import { backoffMs } from "./backoff.js";
import { buildPayloads, type DataPushPayload } from "./data-push.js";
import { HttpSender } from "./http-sender.js";
import { Outbox, instanceId } from "./outbox.js";
export { OUTBOX_MIGRATIONS } from "./outbox.js";

interface LaneItem {
  url: string;
  body: string;
  key: string;
  describe: Record<string, unknown>;
}

interface LaneSource {
  head(): LaneItem | undefined;
  settle(): void;
  failed(error: string): void;
}

export interface LaneStats {
  sent: number;
  failures: number;
  attempt: number;
  last_error: string | null;
  last_sent_at: string | null;
}

/** One ordered stream of callbacks with its own backoff. */
class Lane {
  readonly stats: LaneStats = { sent: 0, failures: 0, attempt: 0, last_error: null, last_sent_at: null };
  private wakeUp: (() => void) | null = null;
  private stopped = false;
  private running: Promise<void> | null = null;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    readonly name: string,
    private readonly source: LaneSource,
    private readonly sender: HttpSender,
    private readonly log: Logger,
    private readonly backoff: (attempt: number) => number,
  ) {}

  start(): void {
    this.running = this.loop();
  }

  wake(): void {
    const w = this.wakeUp;
    this.wakeUp = null;
    w?.();
  }

  private sleep(ms: number | null): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        if (this.timer) clearTimeout(this.timer);
        this.timer = null;
        this.wakeUp = null;
        resolve();
      };
      this.wakeUp = ms === null ? done : null; // a backoff is not cut short by new data
      if (ms !== null) this.timer = setTimeout(done, ms);
      this.stopWaiter = done;
    });
  }

  private stopWaiter: (() => void) | null = null;

  private async loop(): Promise<void> {
    while (!this.stopped) {
      let item: LaneItem | undefined;
      try {
        item = this.source.head();
      } catch (e) {
        this.log.error({ err: e, lane: this.name }, "cannot read the queue");
        await this.sleep(5000);
        continue;
      }
      if (!item) {
        await this.sleep(null);
        continue;
      }
      const r = await this.sender.post(item.url, item.body, item.key);
      if (this.stopped && !r.ok) break;
      if (r.ok) {
        this.source.settle();
        this.stats.sent++;
        this.stats.attempt = 0;
        this.stats.last_sent_at = new Date().toISOString();
        continue;
      }
      this.stats.failures++;
      this.stats.attempt++;
      this.stats.last_error = r.error ?? "failed";
      this.source.failed(this.stats.last_error);
      const delay = this.backoff(this.stats.attempt);
      this.log.warn({ lane: this.name, ...item.describe, error: r.error, attempt: this.stats.attempt, retry_in_ms: delay }, "callback not accepted; will retry");
      await this.sleep(delay);
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.stopWaiter?.();
    await this.running;
  }
}

export class Uplink implements Part {
  readonly name = "uplink";
  private sender: HttpSender | null = null;
  private lanes: Lane[] = [];
  private unsubscribe: (() => void) | null = null;
  private _outbox: Outbox | null = null;

  constructor(
    private readonly config: Config,
    private readonly storage: StoragePart,
    private readonly samples: SampleStore,
    private readonly log: Logger,
    /** Tests shorten the retry schedule; production uses 1 s doubling to 5 min. */
    private readonly backoff: (attempt: number) => number = backoffMs,
  ) {}

  get dataPushUrl(): string {
    return `${this.config.partner.data_push_url.replace(/\/+$/, "")}/${this.config.api_version}/${this.config.partner.data_push_path.replace(/^\/+/, "")}`;
  }

  /** The outbox for execution responses and other messages; available after start(). */
  get outbox(): Outbox {
    if (!this._outbox) throw new Error("uplink is not started");
    return this._outbox;
  }

  /** Commits a callback to the outbox and wakes its lane. Throws if SQLite cannot commit. */
  enqueue(kind: string, url: string, body: unknown, opts: { idempotencyKey?: string } = {}): { id: number; idempotency_key: string } {
    const r = this.outbox.enqueue(kind, url, body, opts);
    this.lanes.find((l) => l.name === "outbox")?.wake();
    return r;
  }

  start(): void {
    const db = this.storage.db;
    const p = this.config.partner;
    this.sender = new HttpSender({ headers: p.headers, timeoutMs: p.timeout_ms, caFile: p.ca_file });
    this._outbox = new Outbox(db);
    const instance = instanceId(db);
    const url = this.dataPushUrl;
    const samples = this.samples;
    const siteId = this.config.site_id;

    // Data push: the head is the first part not yet sent of the oldest unsent snapshot.
    let parts: DataPushPayload[] = [];
    let partIdx = 0;
    const pushSource: LaneSource = {
      head() {
        if (partIdx >= parts.length || parts[0]?.snapshotId <= samples.pushCursor) {
          const [next] = samples.pending(1);
          if (!next) return undefined;
          parts = buildPayloads(next, siteId, instance);
          partIdx = 0;
          if (parts.length === 0) {
            samples.settleThrough(next.id);
            return this.head();
          }
        }
        const p = parts[partIdx];
        return { url, body: p.body, key: p.idempotencyKey, describe: { snapshot: p.snapshotId, part: p.part } };
      },
      settle() {
        partIdx++;
        if (partIdx >= parts.length) samples.settleThrough(parts[0].snapshotId);
      },
      failed() {},
    };
    const outbox = this._outbox;
    let current: number | null = null;
    const outboxSource: LaneSource = {
      head() {
        const m = outbox.head();
        current = m?.id ?? null;
        return m && { url: m.url, body: m.body, key: m.idempotency_key, describe: { message: m.id, kind: m.kind } };
      },
      settle() {
        if (current !== null) outbox.settle(current);
      },
      failed(error) {
        if (current !== null) outbox.recordFailure(current, error);
      },
    };
    const push = new Lane("data_push", pushSource, this.sender, this.log, this.backoff);
    const out = new Lane("outbox", outboxSource, this.sender, this.log, this.backoff);
    this.lanes = [push, out];
    this.unsubscribe = samples.onAppend(() => push.wake());
    for (const l of this.lanes) l.start();
    this.log.info({ data_push_url: url, pending_snapshots: samples.stats().pending_snapshots, outbox: outbox.size() }, "uplink started");
  }

  /** Messages in the outbox (0 before start). */
  outboxDepth(): number {
    return this._outbox?.size() ?? 0;
  }

  /** Per lane, how long the oldest message not yet accepted by the partner has waited. */
  oldestAges(now = Date.now()): Array<{ lane: string; age_s: number }> {
    if (!this._outbox) return [];
    const oldestOutbox = this._outbox.oldestCreatedAt();
    const [snap] = this.samples.pending(1);
    const age = (at: number | null | undefined) => (at == null ? 0 : Math.max(0, (now - at) / 1000));
    return [{ lane: "outbox", age_s: age(oldestOutbox) }, { lane: "data_push", age_s: age(snap?.ts) }];
  }

  stats(): Record<string, LaneStats> {
    return Object.fromEntries(this.lanes.map((l) => [l.name, { ...l.stats }]));
  }

  async stop(): Promise<void> {
    this.unsubscribe?.();
    await Promise.all(this.lanes.map((l) => l.stop()));
    this.samples.persistCursor();
    await this.sender?.close();
  }
}
