// The durable timeline: one row per event_id with its spec, state and measurement
// progress. Receipts, state changes and the execution response (through the delivery log, in
// the same transaction) are committed before they are answered or acted on.
import type { Db, ModuleMigrations } from "../storage/db.js";
import type { HeldMean, MeanState } from "./measure.js";
import type { SitegateError } from "../errors.js";
import { MAX_OPEN_EVENTS, MAX_START_AHEAD_DAYS, tooManyOpen, type EventSpec } from "./request.js";
import type { PreState } from "../model/device.js";
import { LEDGER_SQL, LEDGER_UNRELEASED_SQL } from "./ledger.js";
import { RELEASE_REQUEST_SQL } from "./release-requests.js";

/** An event row's columns after its key (the same in the first table and its rowid successor). */
const EVENT_COLUMNS = `spec TEXT NOT NULL, content_hash TEXT NOT NULL, source TEXT NOT NULL, start_ms INTEGER NOT NULL, end_ms INTEGER NOT NULL,
  state TEXT NOT NULL, receipt TEXT NOT NULL, started_at INTEGER, ended_at INTEGER, progress TEXT, result TEXT,
  created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL`;

export const DISPATCH_MIGRATIONS: ModuleMigrations = {
  module: "dispatch",
  migrations: [
    {
      version: 1,
      sql: `
        CREATE TABLE dp_event (
          event_id TEXT PRIMARY KEY,
          ${EVENT_COLUMNS}
        ) WITHOUT ROWID;
        CREATE INDEX dp_event_state ON dp_event (state, start_ms);
      `,
    },
    // The device ledger (ledger.ts): pre-event state of every device dispatch wrote to.
    { version: 2, sql: LEDGER_SQL },
    // The (state, start_ms) index served only the two queries of start() (the open events
    // and the history sweep), which scan a table bounded by the 30-day history anyway; every
    // receipt paid for it: a second b-tree entry at a random place per event, pages that the
    // synchronous=FULL commit writes (about a fifth of the receipt commit's cost, measured).
    { version: 3, sql: "DROP INDEX IF EXISTS dp_event_state" },
    // A rowid table with a unique event_id: a new event's row (spec, progress: most of its
    // bytes) is appended at the end of the table instead of being put at a random place in
    // a b-tree keyed by GUID, where it splits pages that the synchronous=FULL receipt
    // commit must write. Only the small index entry lands at a random place. A 13-event
    // receipt commit went from about 690 to 380 us on this machine.
    {
      version: 4,
      sql: `
        CREATE TABLE dp_event_v4 (
          id INTEGER PRIMARY KEY,
          event_id TEXT NOT NULL UNIQUE,
          ${EVENT_COLUMNS}
        );
        INSERT INTO dp_event_v4 (event_id, spec, content_hash, source, start_ms, end_ms, state, receipt, started_at, ended_at, progress, result, created_at, updated_at)
          SELECT event_id, spec, content_hash, source, start_ms, end_ms, state, receipt, started_at, ended_at, progress, result, created_at, updated_at
          FROM dp_event ORDER BY created_at, event_id;
        DROP TABLE dp_event;
        ALTER TABLE dp_event_v4 RENAME TO dp_event;
      `,
    },
    // The open events only, in start order: the loading of the scheduler's window page by
    // page (OpenWindow) and the exact count that bounds them (OpenBound; the index covers it)
    // read this index instead of the whole table. A finished event leaves it.
    { version: 5, sql: "CREATE INDEX dp_event_open ON dp_event (start_ms, event_id, state) WHERE state IN ('scheduled', 'running')" },
    // A release that does not read back keeps its ledger row, marked unreleased (B4 "Closed
    // loop"); `sitegate devices release` asks the running daemon through dp_release_request.
    { version: 6, sql: `${LEDGER_UNRELEASED_SQL};\n${RELEASE_REQUEST_SQL}` },
  ],
};

export type EventState = "scheduled" | "running" | "done" | "cancelled" | "missed";
export const OPEN_STATES: readonly EventState[] = ["scheduled", "running"];

export interface DeviceProgress {
  requested_w: number;
  skipped?: string;
  error?: string;
  writes_ok: number;
  writes_failed: number;
  /** Measured power in the event's direction (W), time-weighted. */
  mean?: MeanState;
  /**
   * shed: the load's own power when it was shed (metered plug or thermostat; taken over from
   * another shed: that shed's, from before the load went off; pv_limit: PV's before the cap),
   * and the measured drop its step brought.
   */
  before_w?: number;
  drop_w?: number;
  /** shed: how many fresh meter readings after the step `drop_w` averages (at most STEP_READINGS), and their sum. */
  drop_n?: number;
  drop_sum?: number;
  stepped_at?: number;
  /** When a write to the device was first acknowledged (a shed step waits for a reading after it). */
  acked_at?: number;
  /** shed: the curtailment limit written, percent of the device's maximum. */
  pct?: number;
  /** shed: the load's rated power that was on before (taken over: before the other shed); its estimated drop without a meter of its own. */
  rated_w?: number;
  /** restore: the device's pre-shed state (from the ledger) and whether it reads it back. */
  pre?: PreState;
  restored?: boolean;
}

/** shed: what a step expects a load to bring: its own power before the step (metered) and its rating that was on. */
export interface StepExpectation {
  before_w?: number;
  rated_w?: number;
}

export interface Progress {
  first_write_at?: number;
  /** Start of the measured window: max(start_time, receipt time). */
  window_from?: number;
  /** 1 while the event drives at least one device, sampled with the telemetry: coverage. */
  driven?: MeanState;
  /** shed: the delivered drop, sampled (metered, or estimated when `estimated`). */
  drop?: MeanState;
  estimated?: boolean;
  /** shed: each device's mean power in the quiet minute before start (to take out other events' changes). */
  baselines?: Record<string, number>;
  /** shed: devices another event drove at any moment since this one started (compensated to the end). */
  others?: string[];
  /**
   * shed: what another shed's step expected of each load it held off in the last plan (its
   * before_w and rated_w), kept for when this shed takes the load over already switched off.
   */
  held?: Record<string, StepExpectation>;
  /**
   * Restart gaps (B4): when the gateway came back with the event still running, and since
   * when it had no sample. The first sample after `resumed_at` stands for the gap.
   */
  resumed_at?: number;
  /** Set at a clean stop, which puts every device back: the gap that follows delivered nothing. */
  put_back?: boolean;
  gaps?: Array<{ from: number; to: number }>;
  /** A device the event measures did not answer the read before the put-back after a crash: its gap is unmeasured (`measured: false`). */
  gap_unmeasured?: boolean;
  /** charge/discharge: a battery the event measures was found offline meanwhile; its stale reading was not held (`measured: false`). */
  stale?: boolean;
  /** charge/discharge: the grid meter's mean import over the window, fresh readings only (site_effect_w). */
  site?: HeldMean;
  /** Why the event ended early (a restore ends running sheds). */
  ended_by?: string;
  /** shed, charge/discharge: the grid meter used and its mean import in the last quiet minute before start (absent: no meter or no quiet minute). */
  meter_id?: string;
  baseline_w?: number;
  grid?: MeanState;
  /** shed: devices in the order they were shed; and the measured drop before the last step. */
  shed_steps: string[];
  drop_before_step?: number;
  /** shed: the meter's latest fresh drops since the last step read back (at most STEP_READINGS): the next step's `drop_before_step`. */
  recent_drops?: number[];
  devices: Record<string, DeviceProgress>;
}

export interface EventRow {
  spec: EventSpec;
  content_hash: string;
  state: EventState;
  receipt: "accepted" | "cancelled";
  started_at: number | null;
  ended_at: number | null;
  progress: Progress;
  result: Record<string, unknown> | null;
  created_at: number;
  updated_at: number;
}

interface RawRow {
  event_id: string;
  spec: string;
  content_hash: string;
  state: EventState;
  receipt: "accepted" | "cancelled";
  started_at: number | null;
  ended_at: number | null;
  progress: string | null;
  result: string | null;
  created_at: number;
  updated_at: number;
}

export function emptyProgress(): Progress {
  return { shed_steps: [], devices: {} };
}

/** The progress column: NULL for an empty progress (a new event's; read back as emptyProgress()). */
function progressJson(p: Progress): string | null {
  for (const k in p) if (k !== "shed_steps" && k !== "devices") return JSON.stringify(p);
  return p.shed_steps.length > 0 || Object.keys(p.devices).length > 0 ? JSON.stringify(p) : null;
}

function fromRaw(r: RawRow): EventRow {
  return {
    spec: JSON.parse(r.spec) as EventSpec,
    content_hash: r.content_hash,
    state: r.state,
    receipt: r.receipt,
    started_at: r.started_at,
    ended_at: r.ended_at,
    progress: r.progress ? (JSON.parse(r.progress) as Progress) : emptyProgress(),
    result: r.result ? (JSON.parse(r.result) as Record<string, unknown>) : null,
    created_at: r.created_at,
    updated_at: r.updated_at,
  };
}

const COLS = "event_id, spec, content_hash, state, receipt, started_at, ended_at, progress, result, created_at, updated_at";

/** The newest events of a database that may not hold the dispatch tables yet (`sitegate events` beside the daemon). */
export function readEvents(db: Db, limit: number): EventRow[] {
  const has = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'dp_event'").get();
  return has ? new EventStore(db).list(limit) : [];
}

export class EventStore {
  private readonly stmts;

  constructor(readonly db: Db) {
    this.stmts = {
      get: db.prepare(`SELECT ${COLS} FROM dp_event WHERE event_id = ?`),
      spelling: db.prepare("SELECT json_extract(spec, '$.event_id') AS id FROM dp_event WHERE event_id = ?").pluck(),
      // Positional parameters: a named-parameter object per event was an allocation and a
      // look-up per column in the hot receipt path.
      upsert: db.prepare(
        `INSERT INTO dp_event (event_id, spec, content_hash, source, start_ms, end_ms, state, receipt, started_at, ended_at, progress, result, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (event_id) DO UPDATE SET spec = excluded.spec, content_hash = excluded.content_hash, source = excluded.source,
           start_ms = excluded.start_ms, end_ms = excluded.end_ms, state = excluded.state, receipt = excluded.receipt,
           started_at = excluded.started_at, ended_at = excluded.ended_at, progress = excluded.progress, result = excluded.result,
           updated_at = excluded.updated_at`,
      ),
      open: db.prepare(
        `SELECT ${COLS} FROM dp_event INDEXED BY dp_event_open WHERE state IN ('scheduled', 'running')
           AND (start_ms, event_id) > (?, ?) AND start_ms < ? ORDER BY start_ms, event_id LIMIT ?`,
      ),
      countOpen: db.prepare("SELECT count(*) FROM dp_event INDEXED BY dp_event_open WHERE state IN ('scheduled', 'running')").pluck(),
      list: db.prepare(`SELECT ${COLS} FROM dp_event ORDER BY start_ms DESC, event_id LIMIT ?`),
      progress: db.prepare("UPDATE dp_event SET progress = ?, updated_at = ? WHERE event_id = ?"),
      sweep: db.prepare("DELETE FROM dp_event WHERE state NOT IN ('scheduled', 'running') AND end_ms < ?"),
    };
  }

  get(eventId: string): EventRow | undefined {
    const r = this.stmts.get.get(eventId.toLowerCase()) as RawRow | undefined;
    return r && fromRaw(r);
  }

  /**
   * The key is the lowercased event_id (GUIDs are case-insensitive); the spec keeps the
   * id as the partner first sent it, which the execution response echoes. A later
   * submission in another case updates the same event and keeps that first spelling.
   * `stored`: the row as the caller just read it in this transaction (null: none), which
   * spares the look-up of that spelling.
   */
  put(row: EventRow, stored?: EventRow | null): void {
    const s = row.spec;
    const key = s.event_id.toLowerCase();
    const first = stored === undefined ? (this.stmts.spelling.get(key) as string | undefined) : stored?.spec.event_id;
    if (first !== undefined && first !== s.event_id && first.toLowerCase() === key) row.spec = { ...s, event_id: first };
    this.stmts.upsert.run(
      key,
      JSON.stringify(row.spec),
      row.content_hash,
      s.source,
      s.start_ms,
      s.end_ms,
      row.state,
      row.receipt,
      row.started_at,
      row.ended_at,
      progressJson(row.progress),
      row.result ? JSON.stringify(row.result) : null,
      row.created_at,
      row.updated_at,
    );
  }

  saveProgress(row: EventRow, now: number): void {
    row.updated_at = now;
    this.stmts.progress.run(JSON.stringify(row.progress), now, row.spec.event_id.toLowerCase());
  }

  /**
   * Scheduled and running events after `after` (by start, then key) that start before
   * `until`, at most `limit`, in that order.
   */
  open(after: WindowKey, until: number, limit: number): EventRow[] {
    return (this.stmts.open.all(after.start, after.key, until, limit) as RawRow[]).map(fromRaw);
  }

  /** Events not yet ended (scheduled or running). */
  countOpen(): number {
    return this.stmts.countOpen.get() as number;
  }

  list(limit = 500): EventRow[] {
    return (this.stmts.list.all(limit) as RawRow[]).map(fromRaw);
  }

  /** Forgets finished events that ended before `before` (bounded history). */
  sweep(before: number): number {
    return this.stmts.sweep.run(before).changes;
  }
}

/** An open event's place in start order: its start, then its key (the lowercased event_id). */
export interface WindowKey {
  start: number;
  key: string;
}

/** How far ahead of now the scheduler holds events in memory: a day beyond the furthest start a request may set. */
export const WINDOW_AHEAD_MS = (MAX_START_AHEAD_DAYS + 1) * 86_400_000;
/** The window moves on once it reaches less than this far ahead: one indexed query an hour. */
const WINDOW_STEP_MS = 3_600_000;

/** What the window fills: the scheduler's timeline. */
interface Held {
  readonly size: number;
  get(eventId: string): EventRow | undefined;
  put(row: EventRow): void;
}

/**
 * Which open events the scheduler holds in memory: every one up to `through` in start
 * order, at most MAX_OPEN_EVENTS, and never one that starts beyond WINDOW_AHEAD_MS from
 * now. The rest stay in the database and are loaded page by page as the window moves, so
 * no database (an older version's too, with any number of far-future events) makes start
 * load more than a bounded page.
 */
export class OpenWindow {
  private through: WindowKey = { start: Number.MIN_SAFE_INTEGER, key: "" };

  constructor(private readonly store: EventStore) {}

  /** Whether the event belongs in memory now (else it stays in the database until the window reaches it). */
  holds(spec: EventSpec): boolean {
    const t = this.through;
    return spec.start_ms < t.start || (spec.start_ms === t.start && spec.event_id.toLowerCase() <= t.key);
  }

  /** Loads the open events the window reached since last time, into `held`; returns how many. */
  fill(now: number, held: Held): number {
    const until = now + WINDOW_AHEAD_MS;
    if (this.through.start > until - WINDOW_STEP_MS) return 0;
    const room = MAX_OPEN_EVENTS - held.size;
    if (room <= 0) return 0;
    const rows = this.store.open(this.through, until, room);
    for (const row of rows) if (!held.get(row.spec.event_id)) held.put(row);
    const last = rows[rows.length - 1];
    // A full page may end inside the events of one start: the next page goes on after its last key.
    this.through =
      last === undefined || rows.length < room
        ? { start: until, key: "" }
        : { start: last.spec.start_ms, key: last.spec.event_id.toLowerCase() };
    return rows.length;
  }
}

/**
 * An upper bound of the events not yet ended, made exact whenever it passes the limit: a
 * receipt then pays for the exact count (about 0.8 ms at 10,000 open events on this
 * machine) only near the limit, not on every request. It only grows between counts (an
 * ended event does not lower it), so it never lets a request past the limit.
 */
export class OpenBound {
  private bound: number;

  constructor(private readonly store: EventStore) {
    this.bound = store.countOpen();
  }

  /** Counts `n` events just stored as open (in the caller's transaction); the 400 when that makes too many. */
  add(n: number): SitegateError | null {
    this.bound += n;
    if (this.bound <= MAX_OPEN_EVENTS) return null;
    this.bound = this.store.countOpen();
    return tooManyOpen(this.bound);
  }
}
