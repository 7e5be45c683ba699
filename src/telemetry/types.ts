// Contract between the site clock (producer) and the sample store / uplink (consumer).
import type { Metrics } from "../devices/types.js";

/** A driver's readings, as the devices layer defines them. */
export type { Metrics };

/**
 * One poll cycle: every device read on the same tick, stamped with the time the
 * registers were read (UTC ms), never the time it is sent.
 */
export interface Snapshot {
  ts: number;
  devices: Array<{ device_id: string; metrics: Metrics }>;
}

/** Where the site clock hands finished snapshots: append() commits to SQLite before it returns. */
export interface SnapshotSink {
  append(snapshot: Snapshot): void;
}
