// The lanes of one sink: what every uplink sink (HTTPS to the partner, MQTT to the fleet,
// any later one) needs around its lanes, written once. Each lane is opened on a source with
// its window, started at once, and shares the sink, the logger, the retry backoff and the
// options; the group wakes the lanes a new message's routes name, finds a lane by name,
// reports each lane's figures and stops every lane.
import type { Logger } from "../log.js";
import { Lane, type LaneOptions, type LaneSource, type LaneStats, type Sink } from "./lane.js";
import type { Route } from "./log.js";

export class LaneGroup {
  private readonly lanes = new Map<string, Lane>();

  constructor(
    private readonly sink: Sink,
    private readonly log: Logger,
    /** The delay before retry `attempt` of a message to `address` (util/reconnect-backoff.ts). */
    private readonly backoff: (attempt: number, address: string) => number,
    readonly opts: LaneOptions,
  ) {}

  /** A lane on `source`, `window` in flight at most, started. */
  open(name: string, source: LaneSource, window = 1): Lane {
    const lane = new Lane(name, source, this.sink, this.log, this.backoff, window, this.opts);
    this.lanes.set(name, lane);
    lane.start();
    return lane;
  }

  /**
   * Wakes the lanes that `routes` name for `consumer` (a `messages_appended`); a lane not
   * open yet is opened on `source(lane)` when given, and otherwise not this group's.
   */
  wakeRoutes(routes: readonly Route[], consumer: string, source?: (lane: string) => LaneSource): void {
    for (const r of routes) {
      if (r.consumer !== consumer) continue;
      const lane = this.lanes.get(r.lane) ?? (source ? this.open(r.lane, source(r.lane)) : undefined);
      lane?.wake();
    }
  }

  get(name: string): Lane | undefined {
    return this.lanes.get(name);
  }

  names(): string[] {
    return [...this.lanes.keys()];
  }

  /** Each lane's figures, a copy. */
  stats(): Record<string, LaneStats> {
    return Object.fromEntries([...this.lanes].map(([name, l]) => [name, { ...l.stats }]));
  }

  /** Stops every lane; what is in flight stays unsettled in its source. */
  async stop(): Promise<void> {
    const lanes = [...this.lanes.values()];
    this.lanes.clear();
    await Promise.all(lanes.map((l) => l.stop()));
  }
}
