// Contract between the poller (producer) and the sample store / uplink (consumer).

/** Canonical metric values are numbers (B6 names: power_w, soc_pct, state, ...). */
export type Metrics = Record<string, number>;

/**
 * One poll cycle: every device read on the same tick, stamped with the time the
 * registers were read (UTC ms), never the time it is sent.
 */
export interface Snapshot {
  ts: number;
  devices: Array<{ device_id: string; metrics: Metrics }>;
}

/** Where the poller hands finished snapshots: append() commits to SQLite before it returns. */
export interface SnapshotSink {
  append(snapshot: Snapshot): void;
}
