// The telemetry buffer: every poll-cycle snapshot committed to SQLite before append()
// returns, one row per snapshot with its samples packed (sample-codec.ts), device and
// metric names interned as series ids. It is also the data-push queue: a persisted
// cursor marks what the partner has acknowledged. Bounded by telemetry.retention_max_mb:
// when full, the oldest unsent snapshots are dropped, counted and logged, never the newest.
import type { Part } from "../lifecycle.js";
import type { Logger } from "../log.js";
import type { Db, ModuleMigrations } from "../storage/db.js";
import type { StoragePart } from "../storage/part.js";
import type { Snapshot, SnapshotSink } from "./types.js";
import { packSamples, unpackSamples, type PackedSample } from "./sample-codec.js";

export const SAMPLE_MIGRATIONS: ModuleMigrations = {
  module: "telemetry",
  migrations: [
    {
      version: 1,
      sql: `
        CREATE TABLE tm_series (id INTEGER PRIMARY KEY, device_id TEXT NOT NULL, metric TEXT NOT NULL, UNIQUE (device_id, metric));
        -- AUTOINCREMENT: ids are never reused after the sent rows are deleted (the push cursor and
        -- the Idempotency-Keys are derived from them).
        CREATE TABLE tm_snapshot (id INTEGER PRIMARY KEY AUTOINCREMENT, ts INTEGER NOT NULL, n INTEGER NOT NULL, data BLOB NOT NULL);
        CREATE TABLE tm_state (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
        INSERT INTO tm_state (key, value) VALUES ('push_cursor', 0), ('dropped_samples', 0), ('dropped_snapshots', 0);
      `,
    },
  ],
};

/** Row overhead on top of the blob (record header, rowid, ts, n, b-tree cell), for the size bound. */
const ROW_OVERHEAD = 16;
/** Snapshots held in memory between commits at the most (an hour at 1 s; older ones are dropped, counted). */
const MAX_BUFFERED = 3600;

export interface StoredSnapshot extends Snapshot {
  id: number;
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
}

export class SampleStore implements SnapshotSink, Part {
  readonly name = "samples";
  private db!: Db;
  private series = new Map<string, Map<string, number>>(); // device -> metric -> id
  private names = new Map<number, { device_id: string; metric: string }>();
  private bytes = 0;
  private rows = 0;
  /** Ids are AUTOINCREMENT and only the oldest rows are deleted, so pending = lastId - cursor. */
  private lastId = 0;
  private cursor = 0;
  private cursorPersisted = 0;
  /** Rows are deleted through here: the push cursor, or less while another reader holds them. */
  private deletedThrough = 0;
  /** Other readers of the buffer (the MQTT fleet uplink): each returns its own persisted cursor. */
  private readonly holds = new Set<() => number>();
  private storedTotal = 0;
  private storedBytes = 0;
  private readonly listeners = new Set<() => void>();
  private stmts!: ReturnType<SampleStore["prepare"]>;
  private appendTx!: (snap: Snapshot) => number;

  constructor(
    private readonly storage: StoragePart,
    private readonly opts: { retentionBytes: number; log: Logger; /** ms between telemetry commits; <= 1000: every snapshot at once */ commitIntervalMs?: number },
  ) {}

  private prepare() {
    const db = this.db;
    return {
      insertSeries: db.prepare("INSERT INTO tm_series (device_id, metric) VALUES (?, ?)"),
      insertSnap: db.prepare("INSERT INTO tm_snapshot (ts, n, data) VALUES (?, ?, ?)"),
      after: db.prepare("SELECT id, ts, data FROM tm_snapshot WHERE id > ? ORDER BY id LIMIT ?"),
      oldestPending: db.prepare("SELECT id, n, length(data) AS len FROM tm_snapshot WHERE id > ? ORDER BY id LIMIT ?"),
      deleteThrough: db.prepare("DELETE FROM tm_snapshot WHERE id <= ?"),
      setState: db.prepare("UPDATE tm_state SET value = ? WHERE key = ?"),
      addState: db.prepare("UPDATE tm_state SET value = value + ? WHERE key = ?"),
      getState: db.prepare("SELECT value FROM tm_state WHERE key = ?").pluck(),
      count: db.prepare("SELECT count(*) AS n, coalesce(sum(length(data)), 0) AS bytes, coalesce(max(id), 0) AS last FROM tm_snapshot"),
      countThrough: db.prepare("SELECT count(*) AS n, coalesce(sum(length(data)), 0) AS bytes FROM tm_snapshot WHERE id <= ?"),
      lastId: db.prepare("SELECT coalesce(max(seq), 0) FROM sqlite_sequence WHERE name = 'tm_snapshot'").pluck(),
    };
  }

  start(): void {
    this.stopping = false;
    this.batchTx = null;
    this.db = this.storage.db;
    this.stmts = this.prepare();
    this.reloadSeries();
    // The one full scan, at start; from then on the counters are kept in memory.
    const c = this.stmts.count.get() as { n: number; bytes: number; last: number };
    this.rows = c.n;
    this.bytes = c.bytes + c.n * ROW_OVERHEAD;
    this.lastId = Math.max(c.last, this.stmts.lastId.get() as number);
    this.cursor = this.cursorPersisted = this.stmts.getState.get("push_cursor") as number;
    this.deletedThrough = 0;
    type Fresh = { index: number; device_id: string; metric: string };
    const write = (ts: number, samples: PackedSample[], fresh: Fresh[]): void => {
      for (const f of fresh) samples[f.index].series = this.seriesId(f.device_id, f.metric);
      const data = packSamples(samples);
      const r = this.stmts.insertSnap.run(ts, samples.length, data);
      this.lastId = Number(r.lastInsertRowid);
      this.rows++;
      this.bytes += data.length + ROW_OVERHEAD;
      this.storedBytes += data.length;
    };
    const writeTx = this.db.transaction(write);
    this.appendTx = (snap: Snapshot): number => {
      const samples: PackedSample[] = [];
      const fresh: Fresh[] = [];
      for (const d of snap.devices) {
        const known = this.series.get(d.device_id);
        for (const metric in d.metrics) {
          const value = d.metrics[metric];
          if (typeof value !== "number") continue;
          const id = known?.get(metric);
          if (id === undefined) fresh.push({ index: samples.length, device_id: d.device_id, metric });
          samples.push({ series: id ?? -1, value });
        }
      }
      if (samples.length === 0) return 0;
      // The usual case is one INSERT, atomic on its own; new series need a transaction.
      if (fresh.length) writeTx(snap.ts, samples, fresh);
      else write(snap.ts, samples, fresh);
      return samples.length;
    };
    this.opts.log.info({ snapshots: c.n, pending: this.pendingSnapshots(), bytes: this.bytes }, "sample store open");
  }

  stop(): void {
    this.stopping = true;
    this.flush();
    if (this.db?.open) this.persistCursor();
    this.listeners.clear();
  }

  private seriesId(device_id: string, metric: string): number {
    let byMetric = this.series.get(device_id);
    let id = byMetric?.get(metric);
    if (id === undefined) {
      id = Number(this.stmts.insertSeries.run(device_id, metric).lastInsertRowid);
      if (!byMetric) this.series.set(device_id, (byMetric = new Map()));
      byMetric.set(metric, id);
      this.names.set(id, { device_id, metric });
    }
    return id;
  }

  /**
   * Takes one snapshot. With a commit interval of 1 s it is committed at once (and this throws
   * if SQLite cannot commit); with a longer one it waits in memory and goes in with the others
   * of its interval, in one transaction: one commit (a few pages and a WAL frame) per interval
   * instead of one per poll. A power cut loses at most the snapshots of the open interval;
   * receipts, event states and cursors are committed by their owners as before.
   */
  append(snapshot: Snapshot): void {
    // After stop there is no next interval: commit (or fail) at once, never hold a timer.
    if ((this.opts.commitIntervalMs ?? 0) <= 1000 || this.stopping) {
      this.commitSnapshots([snapshot]);
      return;
    }
    this.buffer.push(snapshot);
    if (this.buffer.length > MAX_BUFFERED) this.buffer.splice(0, this.buffer.length - MAX_BUFFERED).forEach(() => this.droppedBuffered++);
    this.flushTimer ??= setTimeout(() => {
      this.flushTimer = null;
      this.flush();
    }, this.opts.commitIntervalMs);
  }

  /** Commits what waits in memory now (at each interval, and at stop). Never throws: what cannot be committed waits for the next try. */
  flush(): void {
    if (this.flushTimer) clearTimeout(this.flushTimer);
    this.flushTimer = null;
    if (this.buffer.length === 0 || !this.db?.open) return;
    const batch = this.buffer;
    this.buffer = [];
    try {
      this.commitSnapshots(batch);
    } catch (e) {
      this.buffer = batch.concat(this.buffer).slice(-MAX_BUFFERED);
      this.opts.log.error({ err: (e as Error).message, waiting: this.buffer.length }, "telemetry could not be committed; kept in memory for the next interval");
      if (this.buffer.length && !this.stopping) this.flushTimer = setTimeout(() => ((this.flushTimer = null), this.flush()), this.opts.commitIntervalMs);
    }
  }

  private buffer: Snapshot[] = [];
  private flushTimer: NodeJS.Timeout | null = null;
  private stopping = false;
  private droppedBuffered = 0;
  private batchTx: ((snaps: Snapshot[]) => number) | null = null;

  /** Commits snapshots in one transaction, then wakes the readers. Throws if SQLite cannot commit. */
  private commitSnapshots(snaps: Snapshot[]): void {
    let n: number;
    const before = { rows: this.rows, bytes: this.bytes, storedBytes: this.storedBytes, lastId: this.lastId };
    try {
      if (snaps.length === 1) n = this.appendTx(snaps[0]);
      else {
        this.batchTx ??= this.db.transaction((all: Snapshot[]) => all.reduce((sum, s) => sum + this.appendTx(s), 0));
        n = this.batchTx(snaps);
      }
    } catch (e) {
      // The series cache may hold ids the rolled-back transaction never committed.
      this.reloadSeries();
      Object.assign(this, before);
      throw e;
    }
    if (n === 0) return;
    this.storedTotal += n;
    if (this.bytes > this.opts.retentionBytes) this.enforceRetention();
    for (const l of this.listeners) l();
  }

  private reloadSeries(): void {
    this.series.clear();
    this.names.clear();
    for (const r of this.db.prepare("SELECT id, device_id, metric FROM tm_series").all() as Array<{ id: number; device_id: string; metric: string }>) {
      let byMetric = this.series.get(r.device_id);
      if (!byMetric) this.series.set(r.device_id, (byMetric = new Map()));
      byMetric.set(r.metric, r.id);
      this.names.set(r.id, { device_id: r.device_id, metric: r.metric });
    }
  }

  /** Called after each append; returns an unsubscribe function. */
  onAppend(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Unsent snapshots after the push cursor, oldest first. */
  pending(limit: number, afterId = this.cursor): StoredSnapshot[] {
    const rows = this.stmts.after.all(afterId, limit) as Array<{ id: number; ts: number; data: Buffer }>;
    return rows.map((r) => this.decode(r));
  }

  private decode(r: { id: number; ts: number; data: Buffer }): StoredSnapshot {
    const byDevice = new Map<string, Record<string, number>>();
    for (const s of unpackSamples(r.data)) {
      const name = this.names.get(s.series);
      if (!name) continue;
      let m = byDevice.get(name.device_id);
      if (!m) byDevice.set(name.device_id, (m = {}));
      m[name.metric] = s.value;
    }
    return { id: r.id, ts: r.ts, devices: [...byDevice].map(([device_id, metrics]) => ({ device_id, metrics })) };
  }

  /**
   * The partner has the snapshots up to `id`. The cursor is persisted (and the sent rows
   * deleted) at most every `persistEveryMs`, so a drain does not write once per message;
   * after a crash at most that much is sent again, with the same Idempotency-Keys.
   */
  settleThrough(id: number, persistEveryMs = Math.max(1000, this.opts.commitIntervalMs ?? 0)): void {
    if (id <= this.cursor) return;
    this.cursor = id;
    const now = Date.now();
    if (now - this.lastPersist >= persistEveryMs) this.persistCursor();
  }

  private lastPersist = 0;

  /**
   * A second reader of the buffer with its own cursor (persisted by that reader): rows
   * after `cursor()` are kept until it has them too. Returns a release function.
   */
  hold(cursor: () => number): () => void {
    this.holds.add(cursor);
    return () => this.holds.delete(cursor);
  }

  /** Through where rows may go: what every reader has. */
  private deleteFloor(): number {
    let floor = this.cursor;
    for (const h of this.holds) floor = Math.min(floor, h());
    return floor;
  }

  /** Writes the cursor and deletes what every reader has; gives freed pages back to the file. */
  persistCursor(): void {
    this.lastPersist = Date.now();
    const floor = this.deleteFloor();
    if (this.cursor === this.cursorPersisted && floor <= this.deletedThrough) return;
    const cursor = this.cursor;
    const freed = this.db.transaction(() => {
      const gone = this.stmts.countThrough.get(floor) as { n: number; bytes: number };
      this.stmts.setState.run(cursor, "push_cursor");
      this.stmts.deleteThrough.run(floor);
      return gone;
    })();
    this.deletedThrough = Math.max(this.deletedThrough, floor);
    this.cursorPersisted = cursor;
    this.rows -= freed.n;
    this.bytes -= freed.bytes + freed.n * ROW_OVERHEAD;
    this.db.pragma("incremental_vacuum(256)");
  }

  /** Drops the oldest unsent snapshots until the buffer fits its bound again. */
  private enforceRetention(): void {
    const target = this.opts.retentionBytes * 0.9; // free a little more than needed, not once per append
    let dropSnaps = 0;
    let dropSamples = 0;
    let bytes = this.bytes;
    // Settled-but-not-yet-deleted rows go first; they are not losses.
    this.persistCursor();
    // Oldest first, whichever reader still wanted them (what remains is after the floor).
    let through = this.deleteFloor();
    bytes = this.bytes;
    while (bytes > target) {
      const rows = this.stmts.oldestPending.all(through, 500) as Array<{ id: number; n: number; len: number }>;
      // Never the newest: keep at least the last snapshot.
      const usable = rows.length && rows[rows.length - 1].id === this.lastId ? rows.slice(0, -1) : rows;
      if (usable.length === 0) break;
      for (const r of usable) {
        if (bytes <= target) break;
        bytes -= r.len + ROW_OVERHEAD;
        through = r.id;
        dropSnaps++;
        dropSamples += r.n;
      }
    }
    if (dropSnaps === 0) return;
    const gone = this.db.transaction(() => {
      const g = this.stmts.countThrough.get(through) as { n: number; bytes: number };
      this.stmts.deleteThrough.run(through);
      this.stmts.addState.run(dropSamples, "dropped_samples");
      this.stmts.addState.run(dropSnaps, "dropped_snapshots");
      this.stmts.setState.run(Math.max(through, this.cursor), "push_cursor");
      return g;
    })();
    this.cursor = this.cursorPersisted = Math.max(through, this.cursor);
    this.deletedThrough = Math.max(this.deletedThrough, through);
    this.rows -= gone.n;
    this.bytes -= gone.bytes + gone.n * ROW_OVERHEAD;
    this.db.pragma("incremental_vacuum");
    this.opts.log.warn(
      { dropped_snapshots: dropSnaps, dropped_samples: dropSamples, retention_bytes: this.opts.retentionBytes, dropped_samples_total: this.stmts.getState.get("dropped_samples") },
      "telemetry buffer full: dropped the oldest unsent samples",
    );
  }

  private pendingSnapshots(): number {
    return Math.max(0, this.lastId - this.cursor);
  }

  get pushCursor(): number {
    return this.cursor;
  }

  /** Counters kept in memory: cheap enough for every /metrics scrape. */
  stats(): SampleStoreStats {
    return {
      snapshots: this.rows,
      pending_snapshots: this.pendingSnapshots(),
      bytes: this.bytes,
      dropped_samples: this.stmts.getState.get("dropped_samples") as number,
      dropped_snapshots: (this.stmts.getState.get("dropped_snapshots") as number) + this.droppedBuffered,
      push_cursor: this.cursor,
      stored_samples_total: this.storedTotal,
      stored_bytes_total: this.storedBytes,
    };
  }
}
