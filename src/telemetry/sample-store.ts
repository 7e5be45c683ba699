// The telemetry buffer and its readers' queue. Every poll-cycle snapshot gets its id at once
// and waits in memory; the readers see it at once. Snapshots are committed to SQLite in one
// transaction per commit interval (telemetry.commit_interval_s; 1 s: each at once, before
// append() returns): one row per snapshot, the first of a commit packed alone (a key row),
// each later one against the row before it (delta-codec.ts), so a value that did not change
// costs a bit. Each reader is a named consumer with a cursor of its own (sample-consumers.ts).
// Rows every consumer has are deleted by the retention sweep (inside the next commit) and at
// stop, never per message. Bounded by telemetry.retention_max_mb (retention.ts): when full,
// the oldest unsent snapshots are dropped, counted and logged, never the newest. A power cut
// loses at most the open interval. Each append is announced through the one function the
// composition root gives it.
import type { MetricFamily, Part } from "../lifecycle.js";
import type { Logger } from "../log.js";
import type { Db } from "../storage/db.js";
import type { StoragePart } from "../storage/part.js";
import { commitThenSyncData } from "../storage/durable.js";
import type { Snapshot, SnapshotSink } from "./types.js";
import type { SampleStoreStats, StoredSnapshot, TelemetryCursor } from "./sample-schema.js";
import { Consumers, type ConsumerOptions, type CursorState } from "./sample-consumers.js";
import { sampleMetrics } from "./sample-metrics.js";
import { SeriesMap } from "./series.js";
import { unpackSamples } from "./sample-codec.js";
import { moveTelemetry } from "./move-from-main.js";
import { dropThrough, ROW_OVERHEAD, type PendingRow } from "./retention.js";
import { packSnapshot, unpackSnapshot, type PackedSample } from "./delta-codec.js";
import { prepareStatements, type SampleStatements } from "./sample-schema.js";
export { SAMPLE_MIGRATIONS, pendingDataPush } from "./sample-schema.js";
export type { SampleStoreStats, StoredSnapshot, TelemetryCursor } from "./sample-schema.js";
export type { ConsumerOptions } from "./sample-consumers.js";

/** Snapshots held in memory between commits at the most (an hour at 1 s; older ones are dropped, counted). */
const MAX_BUFFERED = 3600;

/** A snapshot with its id, as series ids and values (in memory until committed). */
interface Held {
  id: number;
  ts: number;
  samples: PackedSample[];
}

/** What a sweep deleted: through which id, how many rows, and their bytes. */
type Swept = { through: number; n: number; bytes: number };

interface Row {
  id: number;
  ts: number;
  data: Buffer;
  base: number | null;
}

export class SampleStore implements SnapshotSink, Part {
  readonly name = "samples";
  private db!: Db;
  private readonly series = new SeriesMap();
  private bytes = 0;
  private rows = 0;
  /** The last id given out (held or committed); ids are never reused, so pending = lastId - cursor. */
  private lastId = 0;
  private committedId = 0;
  private cursorState: CursorState | null = null;
  private readonly consumers = new Consumers({
    lastId: () => this.lastId,
    pending: (limit, afterId) => this.pending(limit, afterId),
    state: () => (this.db?.open ? this.cursorState : null),
  });
  /** Rows are deleted through here: what every consumer has. */
  private deletedThrough = 0;
  private storedTotal = 0;
  private storedBytes = 0;
  private storedAlone = 0;
  private committedSnaps = 0;
  private stmts!: SampleStatements;
  private commitTx!: (batch: Held[]) => { n: number; swept: Swept | null };
  /** The retention sweep waits for the next commit (sweep()). */
  private sweepDue = false;
  private held: Held[] = [];
  /** The last commit's snapshots, kept in memory: a reader right behind the writer reads them without SQLite. */
  private recent: Held[] = [];
  private flushTimer: NodeJS.Timeout | null = null;
  private stopping = false;
  private droppedHeld = 0;
  /** The last row pending() decoded, to go on from it without reading the key row again. */
  private lastDecoded: { id: number; base: number | null; samples: PackedSample[] } | null = null;

  constructor(
    private readonly storage: StoragePart,
    private readonly opts: {
      retentionBytes: number;
      log: Logger;
      /** ms between telemetry commits; <= 1000: every snapshot at once */ commitIntervalMs?: number;
      /** Called after each append, when the readers may read it (the composition root's `samples_appended`). */
      appended?: () => void;
    },
  ) {}

  private get batched(): boolean {
    return (this.opts.commitIntervalMs ?? 0) > 1000;
  }

  start(): void {
    this.stopping = false;
    this.held = [];
    this.recent = [];
    this.lastDecoded = null;
    this.db = this.storage.telemetryDb;
    moveTelemetry(this.storage.db, this.db, this.opts.log);
    this.stmts = prepareStatements(this.db);
    this.series.reload(this.db);
    // The one full scan, at start; from then on the counters are kept in memory.
    const c = this.stmts.count.get() as { n: number; bytes: number; last: number; cursor: number };
    this.rows = c.n;
    this.bytes = c.bytes + c.n * ROW_OVERHEAD;
    this.lastId = this.committedId = Math.max(c.last, (this.stmts.getState.get("last_id") as number | undefined) ?? 0);
    const stmts = this.stmts;
    this.cursorState = {
      get: (key) => stmts.getState.get(key) as number | undefined,
      set: (key, value) => void stmts.setState.run(key, value),
    };
    this.consumers.rowCursor = Math.max(c.cursor, this.stmts.getState.get("push_cursor") as number);
    this.consumers.loadAll(this.cursorState);
    this.deletedThrough = 0;
    this.commitTx = this.db.transaction((batch: Held[]) => {
      for (const s of this.series.unsaved) this.stmts.insertSeries.run(s.id, s.device_id, s.metric);
      let n = 0;
      batch.forEach((h, i) => {
        const data = packSnapshot(h.samples, i === 0 ? null : batch[i - 1]!.samples); // i - 1 is in the batch
        this.storedAlone += i === 0 ? data.length : packSnapshot(h.samples).length;
        this.stmts.insertSnap.run(
          h.id,
          h.ts,
          h.samples.length,
          data,
          batch[0]!.id, // forEach runs only over a batch with rows
          i === batch.length - 1 ? this.consumers.inRowThrough : null,
        );
        this.bytes += data.length + ROW_OVERHEAD;
        this.storedBytes += data.length;
        n += h.samples.length;
      });
      this.saveMoved(false);
      return { n, swept: this.sweepDue ? this.sweepRows() : null };
    });
    this.opts.log.info({ snapshots: c.n, pending: this.pendingSnapshots(), bytes: this.bytes }, "sample store open");
  }

  stop(): void {
    this.stopping = true;
    this.flush();
    if (this.db?.open) this.persistCursor();
  }

  /**
   * Takes one snapshot and gives it the next id. With a commit interval of 1 s it is
   * committed at once (this throws if SQLite cannot commit; it stays held for the next try),
   * then the readers are woken. With a longer one the readers are woken at once and it goes
   * into SQLite with the others of its interval, in one transaction.
   */
  append(snapshot: Snapshot): void {
    const samples = this.series.pack(snapshot);
    if (samples.length === 0) return;
    this.held.push({ id: ++this.lastId, ts: snapshot.ts, samples });
    if (this.held.length > MAX_BUFFERED) this.droppedHeld += this.held.splice(0, this.held.length - MAX_BUFFERED).length;
    // After stop there is no next interval: commit (or fail) at once, never hold a timer.
    if (!this.batched || this.stopping) {
      this.commit();
      this.wake();
      return;
    }
    this.wake();
    this.flushTimer ??= setTimeout(() => {
      this.flushTimer = null;
      this.flush();
    }, this.opts.commitIntervalMs);
  }

  private wake(): void {
    this.opts.appended?.();
  }

  /** Commits what is held now (at each interval, and at stop). Never throws: what cannot be committed waits for the next try. */
  flush(): void {
    if (this.flushTimer) clearTimeout(this.flushTimer);
    this.flushTimer = null;
    if (this.held.length === 0 || !this.db?.open) return;
    try {
      this.commit();
    } catch (e) {
      this.opts.log.error(
        { err: (e as Error).message, waiting: this.held.length },
        "telemetry could not be committed; kept in memory for the next interval",
      );
      // A sweep that waited for this commit runs alone: the pages it frees may be what the next try needs.
      if (this.sweepDue) this.trySweepAlone();
      if (!this.stopping) this.flushTimer = setTimeout(() => ((this.flushTimer = null), this.flush()), this.opts.commitIntervalMs ?? 1000);
    }
  }

  /** Commits every held snapshot (and the series they introduce, and the cursor) in one transaction. Throws if SQLite cannot commit. */
  private commit(): void {
    if (this.held.length === 0) return;
    const before = { bytes: this.bytes, storedBytes: this.storedBytes, storedAlone: this.storedAlone };
    let done: { n: number; swept: Swept | null };
    let syncError: Error | null;
    try {
      // Synced at each commit: at NORMAL alone a WAL commit reaches the card only at the next checkpoint.
      const held = this.held;
      ({ value: done, syncError } = commitThenSyncData(this.db, () => this.commitTx(held)));
    } catch (e) {
      Object.assign(this, before);
      this.storage.noteCommitFailed();
      throw e;
    }
    this.committedId = this.held.at(-1)?.id ?? this.committedId;
    this.committedSnaps += this.held.length;
    this.rows += this.held.length;
    this.recent = this.held;
    this.held = [];
    this.series.unsaved = [];
    this.storedTotal += done.n;
    if (done.swept) this.swept(done.swept);
    if (syncError) {
      // Committed, not known to be on the card: kept as committed (a retry would store it
      // twice); the health check then probes the disk and reports it.
      this.opts.log.error({ err: syncError.message }, "telemetry committed but its WAL could not be synced");
      this.storage.noteCommitFailed();
    } else this.storage.noteCommit();
    if (this.bytes > this.opts.retentionBytes) this.enforceRetention();
  }

  /** Snapshots after `afterId` (default: the in-row consumer's cursor), oldest first: the committed ones, then those held. */
  pending(limit: number, afterId = this.consumers.first): StoredSnapshot[] {
    const out: StoredSnapshot[] = [];
    if (limit <= 0) return out;
    if (afterId < this.committedId) {
      const recent = this.recent;
      if ((recent[0]?.id ?? Infinity) <= afterId + 1) this.fromMemory(recent, afterId, limit, out);
      else this.readCommitted(afterId, limit, out);
    }
    this.fromMemory(this.held, afterId, limit, out);
    return out;
  }

  private fromMemory(snaps: readonly Held[], afterId: number, limit: number, out: StoredSnapshot[]): void {
    for (const h of snaps) {
      if (out.length >= limit) break;
      if (h.id > afterId) out.push(this.series.view(h.id, h.ts, h.samples));
    }
  }

  private readCommitted(afterId: number, limit: number, out: StoredSnapshot[]): void {
    const first = this.stmts.firstAfter.get(afterId) as { id: number; base: number | null } | undefined;
    if (!first) return;
    // A delta row is read from its key row, unless the row before it was the last one decoded.
    const chained =
      first.base !== null && first.base !== first.id && this.lastDecoded?.id === afterId && this.lastDecoded.base === first.base;
    let prev: PackedSample[] | null = chained ? this.lastDecoded!.samples : null;
    for (const r of this.stmts.from.iterate(chained || first.base === null ? first.id : first.base) as IterableIterator<Row>) {
      const samples = r.base === null ? unpackSamples(r.data) : unpackSnapshot(r.data, r.base === r.id ? null : prev);
      prev = samples;
      this.lastDecoded = { id: r.id, base: r.base, samples };
      if (r.id > afterId) out.push(this.series.view(r.id, r.ts, samples));
      if (out.length >= limit) break;
    }
  }

  /**
   * A reader of the buffer with a cursor of its own, persisted here; rows are kept until
   * every consumer has them. The same name gives the same consumer.
   */
  consumer(name: string, opts: ConsumerOptions = {}): TelemetryCursor {
    return this.consumers.cursor(name, opts);
  }

  /** Writes the cursors that moved (inside the caller's transaction); the in-row one only when `all`. */
  private saveMoved(all: boolean): void {
    this.consumers.saveMoved(this.cursorState!, this.committedId, all);
  }

  /** The largest id <= `through` whose deletion leaves no delta row without its key row. */
  private alignDown(through: number): number {
    const next = this.stmts.firstAfter.get(through) as { id: number; base: number | null } | undefined;
    return next && next.base !== null && next.base <= through ? next.base - 1 : through;
  }

  /** Writes every cursor and deletes what every consumer has (maintenance, retention and stop call this), in a transaction of its own. */
  persistCursor(): void {
    const swept = this.db.transaction(() => this.sweepRows())();
    this.storage.noteCommit();
    this.swept(swept);
  }

  /**
   * The retention sweep: into the commit of the held snapshots when one is due (on the card a
   * transaction of its own costs what a commit does; inside one, its few pages), else at once.
   */
  sweep(): void {
    if (this.batched && !this.stopping && this.held.length > 0 && this.flushTimer) this.sweepDue = true;
    else this.persistCursor();
  }

  /** The waiting sweep in a transaction of its own (after a failed commit); a failure is logged. */
  private trySweepAlone(): void {
    try {
      this.persistCursor();
    } catch (e) {
      this.opts.log.error({ err: (e as Error).message }, "the retention sweep could not be committed");
    }
  }

  /** The sweep's writes, inside the caller's transaction: every cursor, and the rows every consumer has deleted. */
  private sweepRows(): Swept {
    const floor = this.alignDown(this.consumers.floor(this.committedId));
    const gone = this.stmts.countThrough.get(floor) as { n: number; bytes: number };
    this.saveMoved(true);
    this.stmts.setState.run("last_id", this.committedId);
    if (floor > this.deletedThrough) this.stmts.deleteThrough.run(floor);
    return { through: floor, ...gone };
  }

  /** After the sweep's transaction committed: the counters and the memory follow it. */
  private swept(freed: Swept): void {
    this.sweepDue = false;
    this.deletedThrough = Math.max(this.deletedThrough, freed.through);
    // Deleted rows are gone from memory too: pending() gives what SQLite would.
    if ((this.recent[0]?.id ?? Infinity) <= this.deletedThrough) this.recent = this.recent.filter((h) => h.id > this.deletedThrough);
    this.rows -= freed.n;
    this.bytes -= freed.bytes + freed.n * ROW_OVERHEAD;
  }

  /** Drops the oldest unsent snapshots until the buffer fits its bound again (whole commits, never the newest). */
  private enforceRetention(): void {
    const target = this.opts.retentionBytes * 0.9; // free a little more than needed, not once per append
    // Settled-but-not-yet-deleted rows go first; they are not losses.
    this.persistCursor();
    // Oldest first, whichever reader still wanted them (what remains is after the floor).
    const floor = this.alignDown(this.consumers.floor(this.committedId));
    const oldest = (after: number) => this.stmts.oldestPending.all(after, 500) as PendingRow[];
    const through = this.alignDown(dropThrough(oldest, { floor, bytes: this.bytes, target, newest: this.committedId }));
    if (through <= floor) return;
    const gone = this.db.transaction(() => {
      const g = this.stmts.countBetween.get(floor, through) as { rows: number; samples: number; bytes: number };
      this.stmts.deleteThrough.run(through);
      this.stmts.addState.run(g.samples, "dropped_samples");
      this.stmts.addState.run(g.rows, "dropped_snapshots");
      this.consumers.skip(through);
      this.saveMoved(true);
      return g;
    })();
    this.swept({ through, n: gone.rows, bytes: gone.bytes });
    this.opts.log.warn(
      {
        dropped_snapshots: gone.rows,
        dropped_samples: gone.samples,
        retention_bytes: this.opts.retentionBytes,
        dropped_samples_total: this.stmts.getState.get("dropped_samples"),
      },
      "telemetry buffer full: dropped the oldest unsent samples",
    );
  }

  /** Pending and cursor in stats() are the in-row consumer's. */
  private pendingSnapshots(): number {
    return Math.max(0, this.lastId - this.consumers.first);
  }

  /** Counters kept in memory: cheap enough for every /metrics scrape. */
  stats(): SampleStoreStats {
    return {
      snapshots: this.rows + this.held.length,
      pending_snapshots: this.pendingSnapshots(),
      bytes: this.bytes,
      dropped_samples: this.stmts.getState.get("dropped_samples") as number,
      dropped_snapshots: (this.stmts.getState.get("dropped_snapshots") as number) + this.droppedHeld,
      push_cursor: this.consumers.first,
      stored_samples_total: this.storedTotal,
      stored_bytes_total: this.storedBytes,
      stored_alone_bytes_total: this.storedAlone,
      committed_snapshots_total: this.committedSnaps,
    };
  }

  metrics(): MetricFamily[] {
    return sampleMetrics(this.stats());
  }
}
