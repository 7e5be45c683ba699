// One ordered stream of QoS 1 publishes from durable storage (the telemetry snapshots of
// the fleet's consumer of the sample store): at most `window` messages in flight, settled
// on PUBACK only, strictly as a prefix (the durable cursor never passes a message the
// broker has not acknowledged).
// In-flight messages that a dropped connection leaves without PUBACK are resent by MQTT.js
// after it reconnects (same packet, same idempotency-key); after a crash the durable
// cursor makes this pipe read and send them again, with the same keys.

/** A message ready to publish. `seq` orders the source; `last` marks the last part of one seq. */
export interface PipeMessage {
  seq: number;
  last: boolean;
  topic: string;
  payload: string;
  key: string;
  kind: string;
  retain?: boolean;
}

export interface PipeSource {
  /** Up to about `max` messages after `seq`, in order; whole seqs (a seq's parts together). */
  read(afterSeq: number, max: number): PipeMessage[];
  /** The broker has every message through `seq`. */
  settled(seq: number): void;
}

export type Publish = (msg: PipeMessage, done: (err?: Error) => void) => void;

interface Slot {
  msg: PipeMessage;
  done: boolean;
  failed: boolean;
}

export interface PipeStats {
  published: number;
  acked: number;
  rejected: number;
  in_flight: number;
  last_error: string | null;
}

export class Pipe {
  private readonly slots: Slot[] = [];
  private readSeq: number;
  /** Read from the source, not yet sent (at most one window). */
  private ahead: PipeMessage[] = [];
  private aheadAt = 0;
  private refill = false;
  private prefetching = false;
  private open = false;
  private stopped = false;
  private pumping = false;
  private retryTimer: NodeJS.Timeout | null = null;
  private retries = 0;
  readonly stats: PipeStats = { published: 0, acked: 0, rejected: 0, in_flight: 0, last_error: null };

  constructor(
    readonly name: string,
    private readonly source: PipeSource,
    private readonly publish: Publish,
    startAfter: number,
    private window: number,
    private readonly onError: (msg: PipeMessage, err: Error, retryInMs: number) => void,
    private readonly backoff: (attempt: number) => number,
  ) {
    this.readSeq = startAfter;
  }

  /** The connection is up (with the broker's receive maximum): send what is due. */
  resume(window: number): void {
    this.window = Math.max(1, window);
    this.open = true;
    this.retryFailed();
  }

  private retryFailed(): void {
    if (!this.open || this.retryTimer) return;
    for (const s of this.slots) {
      if (!s.failed || s.done) continue;
      s.failed = false;
      this.send(s);
    }
    this.pump();
  }

  /** The connection is down: send nothing new (MQTT.js keeps and resends the in-flight ones). */
  pause(): void {
    this.open = false;
  }

  stop(): void {
    this.open = false;
    this.stopped = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = null;
  }

  /** New data may be there. */
  pump(): void {
    if (!this.open || this.pumping || this.retryTimer) return;
    this.pumping = true;
    try {
      while (this.open && this.slots.length < this.window) {
        if (this.aheadAt >= this.ahead.length && !this.readAhead()) break;
        const slot: Slot = { msg: this.ahead[this.aheadAt++], done: false, failed: false };
        this.slots.push(slot);
        this.send(slot);
      }
    } finally {
      this.pumping = false;
      this.stats.in_flight = this.slots.length;
    }
    // Read and build the next window while this one is on the wire (after the writes of
    // this tick went out), so that a PUBACK finds the next message ready.
    if (this.open && this.aheadAt >= this.ahead.length && !this.prefetching) {
      this.prefetching = true;
      setImmediate(() => {
        this.prefetching = false;
        if (this.open && this.aheadAt >= this.ahead.length) this.readAhead();
      });
    }
  }

  /** Reads a window's worth from the source (one query per window, not per PUBACK). */
  private readAhead(): boolean {
    this.ahead = this.source.read(this.readSeq, this.window);
    this.aheadAt = 0;
    if (this.ahead.length === 0) return false;
    this.readSeq = this.ahead[this.ahead.length - 1].seq;
    return true;
  }

  private send(slot: Slot): void {
    this.stats.published++;
    this.publish(slot.msg, (err) => this.acked(slot, err));
  }

  private acked(slot: Slot, err?: Error): void {
    if (this.stopped || slot.done || !this.slots.includes(slot)) return;
    if (err) {
      // Refused by the broker (a PUBACK reason code >= 0x80, e.g. not authorized): the same
      // message again after a backoff; the lane sends nothing new meanwhile.
      slot.failed = true;
      this.stats.rejected++;
      this.stats.last_error = err.message;
      this.retries++;
      const delay = this.backoff(this.retries);
      this.onError(slot.msg, err, delay);
      if (this.retryTimer) return;
      this.retryTimer = setTimeout(() => {
        this.retryTimer = null;
        this.retryFailed();
      }, delay);
      return;
    }
    slot.done = true;
    this.stats.acked++;
    this.retries = 0;
    let through: number | null = null;
    while (this.slots.length && this.slots[0].done) {
      const s = this.slots.shift()!;
      if (s.msg.last) through = s.msg.seq;
    }
    this.stats.in_flight = this.slots.length;
    if (through !== null) this.source.settled(through);
    // The PUBACKs of one read from the socket come in one go: refill once after all of them,
    // so the next publishes leave in one write (MQTT.js corks the writes of one tick).
    if (!this.refill) {
      this.refill = true;
      setImmediate(() => {
        this.refill = false;
        this.pump();
      });
    }
  }

  /** Everything read so far has been acknowledged. */
  get idle(): boolean {
    return this.slots.length === 0;
  }
}
