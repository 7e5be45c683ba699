// The telemetry buffer and its readers' queue. Every poll-cycle snapshot gets its id at
// once and waits in memory; the readers see it at once. Snapshots are
// committed to SQLite in one transaction per commit interval (telemetry.commit_interval_s;
// 1 s: each at once, before append() returns): one row per snapshot, the first of a commit
// packed alone (a key row), each later one against the row before it (delta-codec.ts), so a
// value that did not change costs a bit. Each reader is a named consumer with a cursor of
// its own; one of them may have its cursor ride in the last row of each commit (no state
// page written per commit), the others are written with a commit when they moved. Rows
// every consumer has are deleted by the retention sweep and at stop, never per message.
// Bounded by telemetry.retention_max_mb: when full, the oldest unsent snapshots are dropped,
// counted and logged, never the newest. A power cut loses at most the open interval.
// Each append is announced through the one function the composition root gives it.
import type { MetricFamily, Part } from "../lifecycle.js";
import type { Logger } from "../log.js";
import type { Db, ModuleMigrations } from "../storage/db.js";
import type { StoragePart } from "../storage/part.js";
import { withFullSync } from "../storage/durable.js";
import type { Snapshot, SnapshotSink } from "./types.js";
import { unpackSamples } from "./sample-codec.js";
import { moveTelemetry } from "./move-from-main.js";
import { packSnapshot, unpackSnapshot, type PackedSample } from "./delta-codec.js";
import { SitegateError } from "../errors.js";

export const SAMPLE_MIGRATIONS: ModuleMigrations = {
  module: "telemetry",
  migrations: [
    {
      version: 1,
      sql: `
        CREATE TABLE tm_series (id INTEGER PRIMARY KEY, device_id TEXT NOT NULL, metric TEXT NOT NULL, UNIQUE (device_id, metric));
        CREATE TABLE tm_snapshot (id INTEGER PRIMARY KEY AUTOINCREMENT, ts INTEGER NOT NULL, n INTEGER NOT NULL, data BLOB NOT NULL);
        CREATE TABLE tm_state (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
        INSERT INTO tm_state (key, value) VALUES ('push_cursor', 0), ('dropped_samples', 0), ('dropped_snapshots', 0);
      `,
    },
    {
      // Rows packed against their key row (base; NULL: a row of version 1, packed alone) and
      // the push cursor in the last row of a commit. No AUTOINCREMENT (its sqlite_sequence
      // page was one more page written per commit): ids are never reused because last_id
      // is kept whenever rows are deleted.
      version: 2,
      sql: `
        CREATE TABLE tm_snapshot_v2 (id INTEGER PRIMARY KEY, ts INTEGER NOT NULL, n INTEGER NOT NULL, data BLOB NOT NULL, base INTEGER, cursor INTEGER);
        INSERT INTO tm_snapshot_v2 (id, ts, n, data) SELECT id, ts, n, data FROM tm_snapshot;
        INSERT INTO tm_state (key, value) VALUES ('last_id', (SELECT coalesce(max(seq), 0) FROM sqlite_sequence WHERE name = 'tm_snapshot'));
        DROP TABLE tm_snapshot;
        ALTER TABLE tm_snapshot_v2 RENAME TO tm_snapshot;
      `,
    },
  ],
};

/** Row overhead on top of the blob (record header, rowid, ts, n, base, b-tree cell), for the size bound. */
const ROW_OVERHEAD = 20;
/** Snapshots held in memory between commits at the most (an hour at 1 s; older ones are dropped, counted). */
const MAX_BUFFERED = 3600;

export interface StoredSnapshot extends Snapshot {
  id: number;
}

/** One reader of the buffer: the snapshots after its cursor, and how far it has them. */
export interface TelemetryCursor {
  readonly name: string;
  /** Every snapshot through here is settled for this consumer. */
  readonly through: number;
  /** Snapshots not yet settled for this consumer. */
  readonly backlog: number;
  /** Its snapshots after the cursor (or `afterId`), oldest first. */
  pending(limit: number, afterId?: number): StoredSnapshot[];
  /** It has the snapshots through `id`: in memory now, persisted with a commit (a crash sends again at most that much). */
  settleThrough(id: number): void;
}

export interface ConsumerOptions {
  /** Its cursor rides in the last row of each commit (at most one consumer). */
  inRow?: boolean;
  /** Where it starts when the store has no cursor of it yet. */
  initial?: () => number;
}

/** A consumer's state key in tm_state; the in-row consumer's is the file's first cursor key. */
const stateKey = (c: { name: string; inRow: boolean }) => (c.inRow ? "push_cursor" : `cursor:${c.name}`);

interface Consumer {
  name: string;
  inRow: boolean;
  initial?: () => number;
  through: number;
  /** What tm_state holds for it. */
  saved: number;
}

export interface SampleStoreStats {
  snapshots: number;
  pending_snapshots: number;
  bytes: number;
  dropped_samples: number;
  dropped_snapshots: number;
  push_cursor: number;
  stored_samples_total: number;
  /** Bytes of the packed samples committed since start (the reference of the write budget). */
  stored_bytes_total: number;
  /** What the same samples would take packed alone, each snapshot without deltas (what deltas save). */
  stored_alone_bytes_total: number;
  /** Snapshots committed since start. */
  committed_snapshots_total: number;
}

/** A snapshot with its id, as series ids and values (in memory until committed). */
interface Held {
  id: number;
  ts: number;
  samples: PackedSample[];
}

interface Row {
  id: number;
  ts: number;
  data: Buffer;
  base: number | null;
}

export class SampleStore implements SnapshotSink, Part {
  readonly name = "samples";
  private db!: Db;
  private series = new Map<string, Map<string, number>>(); // device -> metric -> id
  private names = new Map<number, { device_id: string; metric: string }>();
  /** Series made since the last commit: inserted with the commit that first uses them. */
  private newSeries: Array<{ id: number; device_id: string; metric: string }> = [];
  private nextSeries = 1;
  private bytes = 0;
  private rows = 0;
  /** The last id given out (held or committed); ids are never reused, so pending = lastId - cursor. */
  private lastId = 0;
  private committedId = 0;
  private readonly consumers = new Map<string, Consumer>();
  /** Rows are deleted through here: what every consumer has. */
  private deletedThrough = 0;
  private storedTotal = 0;
  private storedBytes = 0;
  private storedAlone = 0;
  private committedSnaps = 0;
  private stmts!: ReturnType<SampleStore["prepare"]>;
  private commitTx!: (batch: Held[]) => number;
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

  private prepare() {
    const db = this.db;
    return {
      insertSeries: db.prepare("INSERT INTO tm_series (id, device_id, metric) VALUES (?, ?, ?)"),
      insertSnap: db.prepare("INSERT INTO tm_snapshot (id, ts, n, data, base, cursor) VALUES (?, ?, ?, ?, ?, ?)"),
      firstAfter: db.prepare("SELECT id, base FROM tm_snapshot WHERE id > ? ORDER BY id LIMIT 1"),
      from: db.prepare("SELECT id, ts, data, base FROM tm_snapshot WHERE id >= ? ORDER BY id"),
      oldestPending: db.prepare("SELECT id, length(data) AS len, base FROM tm_snapshot WHERE id > ? ORDER BY id LIMIT ?"),
      deleteThrough: db.prepare("DELETE FROM tm_snapshot WHERE id <= ?"),
      setState: db.prepare("INSERT INTO tm_state (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value"),
      addState: db.prepare("UPDATE tm_state SET value = value + ? WHERE key = ?"),
      getState: db.prepare("SELECT value FROM tm_state WHERE key = ?").pluck(),
      count: db.prepare(
        "SELECT count(*) AS n, coalesce(sum(length(data)), 0) AS bytes, coalesce(max(id), 0) AS last, coalesce(max(cursor), 0) AS cursor FROM tm_snapshot",
      ),
      countThrough: db.prepare("SELECT count(*) AS n, coalesce(sum(length(data)), 0) AS bytes FROM tm_snapshot WHERE id <= ?"),
      countBetween: db.prepare(
        "SELECT count(*) AS rows, coalesce(sum(n), 0) AS samples, coalesce(sum(length(data)), 0) AS bytes FROM tm_snapshot WHERE id > ? AND id <= ?",
      ),
    };
  }

  start(): void {
    this.stopping = false;
    this.held = [];
    this.recent = [];
    this.lastDecoded = null;
    this.db = this.storage.telemetryDb;
    moveTelemetry(this.storage.db, this.db, this.opts.log);
    this.stmts = this.prepare();
    this.reloadSeries();
    // The one full scan, at start; from then on the counters are kept in memory.
    const c = this.stmts.count.get() as { n: number; bytes: number; last: number; cursor: number };
    this.rows = c.n;
    this.bytes = c.bytes + c.n * ROW_OVERHEAD;
    this.lastId = this.committedId = Math.max(c.last, (this.stmts.getState.get("last_id") as number | undefined) ?? 0);
    this.rowCursor = Math.max(c.cursor, this.stmts.getState.get("push_cursor") as number);
    for (const k of this.consumers.values()) this.load(k);
    this.deletedThrough = 0;
    this.commitTx = this.db.transaction((batch: Held[]): number => {
      for (const s of this.newSeries) this.stmts.insertSeries.run(s.id, s.device_id, s.metric);
      let n = 0;
      batch.forEach((h, i) => {
        const data = packSnapshot(h.samples, i === 0 ? null : batch[i - 1].samples);
        this.storedAlone += i === 0 ? data.length : packSnapshot(h.samples).length;
        this.stmts.insertSnap.run(
          h.id,
          h.ts,
          h.samples.length,
          data,
          batch[0].id,
          i === batch.length - 1 ? (this.inRow()?.through ?? null) : null,
        );
        this.bytes += data.length + ROW_OVERHEAD;
        this.storedBytes += data.length;
        n += h.samples.length;
      });
      this.saveMoved(false);
      return n;
    });
    this.opts.log.info({ snapshots: c.n, pending: this.pendingSnapshots(), bytes: this.bytes }, "sample store open");
  }

  stop(): void {
    this.stopping = true;
    this.flush();
    if (this.db?.open) this.persistCursor();
  }

  private seriesId(device_id: string, metric: string): number {
    let byMetric = this.series.get(device_id);
    let id = byMetric?.get(metric);
    if (id === undefined) {
      id = this.nextSeries++;
      if (!byMetric) this.series.set(device_id, (byMetric = new Map()));
      byMetric.set(metric, id);
      this.names.set(id, { device_id, metric });
      this.newSeries.push({ id, device_id, metric });
    }
    return id;
  }

  /**
   * Takes one snapshot and gives it the next id. With a commit interval of 1 s it is
   * committed at once (this throws if SQLite cannot commit; it stays held for the next try),
   * then the readers are woken. With a longer one the readers are woken at once and it goes
   * into SQLite with the others of its interval, in one transaction.
   */
  append(snapshot: Snapshot): void {
    const samples: PackedSample[] = [];
    for (const d of snapshot.devices) {
      for (const metric in d.metrics) {
        const value = d.metrics[metric];
        if (typeof value === "number") samples.push({ series: this.seriesId(d.device_id, metric), value });
      }
    }
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
      if (!this.stopping) this.flushTimer = setTimeout(() => ((this.flushTimer = null), this.flush()), this.opts.commitIntervalMs ?? 1000);
    }
  }

  /** Commits every held snapshot (and the series they introduce, and the cursor) in one transaction. Throws if SQLite cannot commit. */
  private commit(): void {
    if (this.held.length === 0) return;
    const before = { bytes: this.bytes, storedBytes: this.storedBytes, storedAlone: this.storedAlone };
    let n: number;
    try {
      // Synced at each commit (one fsync per commit_interval_s, no extra bytes): at NORMAL a
      // WAL commit reaches the card only at the next checkpoint, and a power cut lost more
      // than the stated window.
      const held = this.held;
      n = withFullSync(this.db, () => this.commitTx(held));
    } catch (e) {
      Object.assign(this, before);
      this.storage.noteCommitFailed();
      throw e;
    }
    this.committedId = this.held[this.held.length - 1].id;
    this.committedSnaps += this.held.length;
    this.rows += this.held.length;
    this.recent = this.held;
    this.held = [];
    this.newSeries = [];
    this.storedTotal += n;
    this.storage.noteCommit();
    if (this.bytes > this.opts.retentionBytes) this.enforceRetention();
  }

  private reloadSeries(): void {
    this.series.clear();
    this.names.clear();
    this.newSeries = [];
    this.nextSeries = 1;
    for (const r of this.db.prepare("SELECT id, device_id, metric FROM tm_series").all() as Array<{
      id: number;
      device_id: string;
      metric: string;
    }>) {
      let byMetric = this.series.get(r.device_id);
      if (!byMetric) this.series.set(r.device_id, (byMetric = new Map()));
      byMetric.set(r.metric, r.id);
      this.names.set(r.id, { device_id: r.device_id, metric: r.metric });
      this.nextSeries = Math.max(this.nextSeries, r.id + 1);
    }
  }

  /** Snapshots after `afterId` (default: the in-row consumer's cursor), oldest first: the committed ones, then those held. */
  pending(limit: number, afterId = this.firstCursor): StoredSnapshot[] {
    const out: StoredSnapshot[] = [];
    if (limit <= 0) return out;
    if (afterId < this.committedId) {
      const recent = this.recent;
      if (recent.length && recent[0].id <= afterId + 1) this.fromMemory(recent, afterId, limit, out);
      else this.readCommitted(afterId, limit, out);
    }
    this.fromMemory(this.held, afterId, limit, out);
    return out;
  }

  private fromMemory(snaps: readonly Held[], afterId: number, limit: number, out: StoredSnapshot[]): void {
    for (const h of snaps) {
      if (out.length >= limit) break;
      if (h.id > afterId) out.push(this.view(h.id, h.ts, h.samples));
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
      if (r.id > afterId) out.push(this.view(r.id, r.ts, samples));
      if (out.length >= limit) break;
    }
  }

  private view(id: number, ts: number, samples: readonly PackedSample[]): StoredSnapshot {
    const byDevice = new Map<string, Record<string, number>>();
    for (const s of samples) {
      const name = this.names.get(s.series);
      if (!name) continue;
      let m = byDevice.get(name.device_id);
      if (!m) byDevice.set(name.device_id, (m = {}));
      m[name.metric] = s.value;
    }
    return { id, ts, devices: [...byDevice].map(([device_id, metrics]) => ({ device_id, metrics })) };
  }

  /**
   * A reader of the buffer with a cursor of its own, persisted here; rows are kept until
   * every consumer has them. The same name gives the same consumer.
   */
  consumer(name: string, opts: ConsumerOptions = {}): TelemetryCursor {
    let k = this.consumers.get(name);
    if (!k) {
      const inRow = opts.inRow === true;
      if (inRow && this.inRow())
        throw new SitegateError("INTERNAL", `sample store: ${this.inRow()!.name} already has its cursor in the rows`);
      k = { name, inRow, initial: opts.initial, through: 0, saved: 0 };
      this.consumers.set(name, k);
      if (this.db?.open) this.load(k);
    }
    const c = k;
    const lastId = () => this.lastId;
    return {
      name,
      get through() {
        return c.through;
      },
      get backlog() {
        return Math.max(0, lastId() - c.through);
      },
      pending: (limit, afterId = c.through) => this.pending(limit, afterId),
      settleThrough: (id) => {
        if (id > c.through) c.through = id;
      },
    };
  }

  /** The in-row cursor as found at start (the rows are newer than its state key after a crash). */
  private rowCursor = 0;

  /** The in-row consumer's cursor (what stats() and pending() go by), also before it is registered. */
  private get firstCursor(): number {
    return this.inRow()?.through ?? this.rowCursor;
  }

  private inRow(): Consumer | undefined {
    for (const k of this.consumers.values()) if (k.inRow) return k;
    return undefined;
  }

  private load(k: Consumer): void {
    const saved = this.stmts.getState.get(stateKey(k)) as number | undefined;
    k.saved = saved ?? 0;
    k.through = Math.max(k.through, saved ?? k.initial?.() ?? 0, k.inRow ? this.rowCursor : 0);
  }

  /** Writes the cursors that moved (inside the caller's transaction); the in-row one only when `all`. */
  private saveMoved(all: boolean): void {
    for (const k of this.consumers.values()) {
      const through = Math.min(k.through, this.committedId);
      if (through === k.saved || (k.inRow && !all)) continue;
      this.stmts.setState.run(stateKey(k), through);
      k.saved = through;
    }
  }

  /** Through where rows may go: what every consumer has (nothing while there is none yet). */
  private deleteFloor(): number {
    let floor = this.consumers.size ? this.committedId : 0;
    for (const k of this.consumers.values()) floor = Math.min(floor, k.through);
    return floor;
  }

  /** The largest id <= `through` whose deletion leaves no delta row without its key row. */
  private alignDown(through: number): number {
    const next = this.stmts.firstAfter.get(through) as { id: number; base: number | null } | undefined;
    return next && next.base !== null && next.base <= through ? next.base - 1 : through;
  }

  /** Writes every cursor and deletes what every consumer has (the retention sweep, maintenance and stop call this). */
  persistCursor(): void {
    const floor = this.alignDown(this.deleteFloor());
    const freed = this.db.transaction(() => {
      const gone = this.stmts.countThrough.get(floor) as { n: number; bytes: number };
      this.saveMoved(true);
      this.stmts.setState.run("last_id", this.committedId);
      if (floor > this.deletedThrough) this.stmts.deleteThrough.run(floor);
      return gone;
    })();
    this.storage.noteCommit();
    this.deletedThrough = Math.max(this.deletedThrough, floor);
    this.forgetRecent();
    this.rows -= freed.n;
    this.bytes -= freed.bytes + freed.n * ROW_OVERHEAD;
  }

  /** Deleted rows are gone from memory too: pending() gives what SQLite would. */
  private forgetRecent(): void {
    if (this.recent.length && this.recent[0].id <= this.deletedThrough) this.recent = this.recent.filter((h) => h.id > this.deletedThrough);
  }

  /** Drops the oldest unsent snapshots until the buffer fits its bound again (whole commits, never the newest). */
  private enforceRetention(): void {
    const target = this.opts.retentionBytes * 0.9; // free a little more than needed, not once per append
    // Settled-but-not-yet-deleted rows go first; they are not losses.
    this.persistCursor();
    // Oldest first, whichever reader still wanted them (what remains is after the floor).
    const floor = this.alignDown(this.deleteFloor());
    let through = floor;
    let bytes = this.bytes;
    scan: while (bytes > target) {
      const rows = this.stmts.oldestPending.all(through, 500) as Array<{ id: number; len: number; base: number | null }>;
      // Never the newest: keep at least the last snapshot.
      const usable = rows.length && rows[rows.length - 1].id === this.committedId ? rows.slice(0, -1) : rows;
      if (usable.length === 0) break;
      for (const r of usable) {
        // Stop only where a commit starts, so that no delta row loses its key row.
        if (bytes <= target && (r.base === null || r.base === r.id)) break scan;
        bytes -= r.len + ROW_OVERHEAD;
        through = r.id;
      }
    }
    through = this.alignDown(through);
    if (through <= floor) return;
    const gone = this.db.transaction(() => {
      const g = this.stmts.countBetween.get(floor, through) as { rows: number; samples: number; bytes: number };
      this.stmts.deleteThrough.run(through);
      this.stmts.addState.run(g.samples, "dropped_samples");
      this.stmts.addState.run(g.rows, "dropped_snapshots");
      for (const k of this.consumers.values()) k.through = Math.max(through, k.through);
      this.saveMoved(true);
      return g;
    })();
    this.deletedThrough = Math.max(this.deletedThrough, through);
    this.forgetRecent();
    this.rows -= gone.rows;
    this.bytes -= gone.bytes + gone.rows * ROW_OVERHEAD;
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
    return Math.max(0, this.lastId - this.firstCursor);
  }

  /** Counters kept in memory: cheap enough for every /metrics scrape. */
  stats(): SampleStoreStats {
    return {
      snapshots: this.rows + this.held.length,
      pending_snapshots: this.pendingSnapshots(),
      bytes: this.bytes,
      dropped_samples: this.stmts.getState.get("dropped_samples") as number,
      dropped_snapshots: (this.stmts.getState.get("dropped_snapshots") as number) + this.droppedHeld,
      push_cursor: this.firstCursor,
      stored_samples_total: this.storedTotal,
      stored_bytes_total: this.storedBytes,
      stored_alone_bytes_total: this.storedAlone,
      committed_snapshots_total: this.committedSnaps,
    };
  }

  metrics(): MetricFamily[] {
    const st = this.stats();
    return [
      {
        name: "sitegate_samples_pending_snapshots",
        help: "snapshots not yet accepted by the partner",
        type: "gauge",
        values: [{ value: st.pending_snapshots }],
      },
      { name: "sitegate_samples_buffer_bytes", help: "telemetry buffer size", type: "gauge", values: [{ value: st.bytes }] },
      {
        name: "sitegate_samples_stored_total",
        help: "samples committed to the telemetry buffer",
        type: "counter",
        values: [{ value: st.stored_samples_total }],
      },
      {
        name: "sitegate_samples_stored_bytes_total",
        help: "bytes of the packed samples committed (what the write budget is measured against)",
        type: "counter",
        values: [{ value: st.stored_bytes_total }],
      },
      {
        name: "sitegate_samples_stored_alone_bytes_total",
        help: "bytes the committed samples would take with every snapshot packed alone (no deltas)",
        type: "counter",
        values: [{ value: st.stored_alone_bytes_total }],
      },
      {
        name: "sitegate_samples_committed_snapshots_total",
        help: "snapshots committed to telemetry.db",
        type: "counter",
        values: [{ value: st.committed_snapshots_total }],
      },
      {
        name: "sitegate_samples_dropped_total",
        help: "unsent samples dropped because the buffer was full",
        type: "counter",
        values: [{ value: st.dropped_samples }],
      },
    ];
  }
}

/** Snapshots after the data push's cursor, read from a telemetry.db the daemon is not holding (`sitegate outbox`). */
export function pendingDataPush(db: Db): number {
  const cursor = (db.prepare("SELECT value FROM tm_state WHERE key = 'push_cursor'").pluck().get() as number | undefined) ?? 0;
  return db.prepare("SELECT count(*) FROM tm_snapshot WHERE id > ?").pluck().get(cursor) as number;
}
