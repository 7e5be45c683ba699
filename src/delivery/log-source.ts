// A lane's source in the delivery log: the messages of one consumer's lane after its
// cursor, oldest first. Several may be in flight; the cursor moves by the one policy of
// settle-order.ts. A lane found empty is read again after an append in this process, or
// after `recheckMs` (another process's).
import type { LaneItem, LaneSource } from "./lane.js";
import type { DeliveryLog, LogMessage } from "./log.js";
import { SettleOrder } from "./settle-order.js";

export class LogSource implements LaneSource {
  /** The newest message handed out (at first the cursor); the next one read is after it. */
  private handed: number | null = null;
  private readonly order: SettleOrder;
  /** When the lane was last found empty, and the log's append count then. */
  private empty: { at: number; appends: number } | null = null;

  constructor(
    private readonly log: DeliveryLog,
    readonly consumer: string,
    readonly lane: string,
    /** How long an empty lane is taken as empty without a new append in this process (0: always ask). */
    private readonly recheckMs = 0,
  ) {
    this.order = new SettleOrder((through) => this.log.advance(this.consumer, this.lane, through));
  }

  next(busy: ReadonlySet<string>): LaneItem | undefined {
    const e = this.empty;
    if (e && e.appends === this.log.appends && performance.now() - e.at < this.recheckMs) return undefined;
    this.handed ??= this.log.cursor(this.consumer, this.lane).through;
    for (const m of this.log.after(this.consumer, this.lane, this.handed, busy.size + 1)) {
      if (busy.has(`m${m.id}`)) continue;
      this.handed = m.id;
      this.order.handOut(m.id);
      this.empty = null;
      return this.item(m);
    }
    this.empty = { at: performance.now(), appends: this.log.appends };
    return undefined;
  }

  private item(m: LogMessage): LaneItem {
    const done = () => this.order.settle(m.id);
    return {
      ref: `m${m.id}`,
      address: m.address,
      kind: m.kind,
      body: m.body,
      key: m.idempotency_key,
      describe: { message: m.id, kind: m.kind },
      settle: done,
      failed: (error) => this.log.recordFailure(this.consumer, this.lane, error),
      deadLetter: (error, attempts) =>
        this.log.atomically(() => {
          this.log.deadLetter({ ...m, attempts }, error);
          done();
        }),
    };
  }
}
