// A lane's source in the sample store: the snapshots after one consumer's cursor, each
// encoded by the transport into one or more payloads (the data push's body and key,
// spec 2.6). The partner's data push and the fleet's telemetry both read through it;
// only the encoder, the address and what a dead letter becomes differ. Snapshots are read
// a batch per query, not one per answer; the cursor moves by the one policy of
// settle-order.ts (a snapshot is settled when all its parts are). A lane may first take
// messages of another source (dead letters put back by hand come through the log).
import { SitegateError } from "../errors.js";
import type { StoredSnapshot, TelemetryCursor } from "../telemetry/sample-store.js";
import type { LaneItem, LaneSource } from "./lane.js";
import { SettleOrder } from "./settle-order.js";

export interface SnapshotPayload {
  body: string;
  key: string;
}

export interface SnapshotSourceOptions {
  /** The items' kind (the lane's name). */
  kind: string;
  /** Where each payload goes (a URL, a topic), as the sink reads it. */
  address: string;
  /** A snapshot's payloads, in order; none when it has nothing to report (it settles with the ones before it). */
  encode(snap: StoredSnapshot): SnapshotPayload[];
  /** Snapshots read per query. */
  batch: number;
  /** Snapshots handed out at most past the oldest one not settled (a slow failure lets newer ones pass it). */
  maxAhead: number;
  /** A payload the receiver refused for good (lanes that never dead-letter leave this out). */
  deadLetter?: (p: { body: string; key: string; ts: number }, error: string, attempts: number) => void;
  /** Asked first (the data push's dead letters put back by hand). */
  before?: LaneSource;
}

interface Part extends SnapshotPayload {
  id: number;
  ts: number;
  part: number;
}

export class SnapshotSource implements LaneSource {
  private buffer: Part[] = [];
  private at = 0;
  private fetchedThrough: number;
  private readonly order: SettleOrder;

  constructor(
    private readonly cursor: TelemetryCursor,
    private readonly opts: SnapshotSourceOptions,
  ) {
    this.fetchedThrough = cursor.through;
    this.order = new SettleOrder((through) => cursor.settleThrough(through));
  }

  next(busy: ReadonlySet<string>): LaneItem | undefined {
    const again = this.opts.before?.next(busy);
    if (again) return again;
    const through = this.cursor.through;
    // The size bound may have dropped unsent snapshots (also ones read already): forget them here too.
    if (this.fetchedThrough < through) this.fetchedThrough = through;
    if (this.at < this.buffer.length && this.buffer[this.at]!.id <= through) {
      this.buffer = this.buffer.slice(this.at).filter((p) => p.id > through);
      this.at = 0;
    }
    this.order.drop(through);
    if (this.at >= this.buffer.length) this.read();
    const p = this.buffer[this.at++];
    return p && this.item(p);
  }

  /** The next batch with something to send (snapshots with nothing to report settle on the way). */
  private read(): void {
    this.buffer = [];
    this.at = 0;
    while (this.buffer.length === 0 && this.order.size < this.opts.maxAhead) {
      const snaps = this.cursor.pending(this.opts.batch, this.fetchedThrough);
      if (snaps.length === 0) return;
      for (const snap of snaps) {
        const parts = this.opts.encode(snap);
        this.fetchedThrough = snap.id;
        for (let i = 0; i < parts.length; i++) this.buffer.push({ ...parts[i]!, id: snap.id, ts: snap.ts, part: i });
        this.order.handOut(snap.id, parts.length);
      }
    }
  }

  private item(p: Part): LaneItem {
    return new SnapshotItem(this, p);
  }

  /** One part of snapshot `id` is off the lane (accepted, or dead-lettered). */
  settled(id: number): void {
    this.order.settle(id);
  }

  /** A part the receiver refused for good. */
  deadLettered(p: Part, error: string, attempts: number): void {
    const dead = this.opts.deadLetter;
    if (!dead) throw new SitegateError("INTERNAL", `the ${this.opts.kind} lane never dead-letters`);
    dead(p, error, attempts);
    this.order.settle(p.id);
  }

  get kind(): string {
    return this.opts.kind;
  }

  get address(): string {
    return this.opts.address;
  }
}

/** A payload as the lane sees it: a class, not closures, since the fleet's telemetry makes thousands a second. */
class SnapshotItem implements LaneItem {
  readonly ref: string;
  readonly address: string;
  readonly kind: string;
  readonly body: string;
  readonly key: string;

  constructor(
    private readonly source: SnapshotSource,
    private readonly part: Part,
  ) {
    this.ref = `s${part.id}:${part.part}`;
    this.address = source.address;
    this.kind = source.kind;
    this.body = part.body;
    this.key = part.key;
  }

  get describe(): Record<string, unknown> {
    return { snapshot: this.part.id, push_part: this.part.part };
  }

  settle(): void {
    this.source.settled(this.part.id);
  }

  failed(): void {}

  deadLetter(error: string, attempts: number): void {
    this.source.deadLettered(this.part, error, attempts);
  }
}
