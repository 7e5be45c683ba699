// The readers of the sample store: each a named consumer with a cursor of its own, kept in
// tm_state. One of them may have its cursor ride in the last row of each commit (no state
// page written per commit); the others are written with a commit when they moved. Rows
// every consumer has may go (the store's retention sweep and stop delete them).
import { SitegateError } from "../errors.js";
import type { StoredSnapshot, TelemetryCursor } from "./sample-schema.js";

export interface ConsumerOptions {
  /** Its cursor rides in the last row of each commit (at most one consumer). */
  inRow?: boolean;
  /** Where it starts when the store has no cursor of it yet. */
  initial?: () => number;
}

interface Consumer {
  name: string;
  inRow: boolean;
  initial?: () => number;
  through: number;
  /** What tm_state holds for it. */
  saved: number;
}

/** tm_state, as the consumers read and write it. */
export interface CursorState {
  get(key: string): number | undefined;
  set(key: string, value: number): void;
}

/** A consumer's state key in tm_state; the in-row consumer's is the file's first cursor key. */
const stateKey = (c: { name: string; inRow: boolean }) => (c.inRow ? "push_cursor" : `cursor:${c.name}`);

export class Consumers {
  private readonly byName = new Map<string, Consumer>();
  /** The in-row cursor as found at start (the rows are newer than its state key after a crash). */
  rowCursor = 0;

  constructor(
    private readonly store: {
      lastId(): number;
      pending(limit: number, afterId: number): StoredSnapshot[];
      /** tm_state while the store is open. */
      state(): CursorState | null;
    },
  ) {}

  /** A reader with a cursor of its own; the same name gives the same consumer. */
  cursor(name: string, opts: ConsumerOptions = {}): TelemetryCursor {
    let k = this.byName.get(name);
    if (!k) {
      const inRow = opts.inRow === true;
      const taken = this.inRow();
      if (inRow && taken) throw new SitegateError("INTERNAL", `sample store: ${taken.name} already has its cursor in the rows`);
      k = { name, inRow, initial: opts.initial, through: 0, saved: 0 };
      this.byName.set(name, k);
      const state = this.store.state();
      if (state) this.load(k, state);
    }
    const c = k;
    const store = this.store;
    return {
      name,
      get through() {
        return c.through;
      },
      get backlog() {
        return Math.max(0, store.lastId() - c.through);
      },
      pending: (limit, afterId = c.through) => store.pending(limit, afterId),
      settleThrough: (id) => {
        if (id > c.through) c.through = id;
      },
    };
  }

  /** The in-row consumer's cursor (what the store's stats go by), also before it is registered. */
  get first(): number {
    return this.inRow()?.through ?? this.rowCursor;
  }

  /** The in-row consumer's cursor, written into the last row of a commit. */
  get inRowThrough(): number | null {
    return this.inRow()?.through ?? null;
  }

  private inRow(): Consumer | undefined {
    for (const k of this.byName.values()) if (k.inRow) return k;
    return undefined;
  }

  /** Every cursor from tm_state (at start). */
  loadAll(state: CursorState): void {
    for (const k of this.byName.values()) this.load(k, state);
  }

  private load(k: Consumer, state: CursorState): void {
    const saved = state.get(stateKey(k));
    k.saved = saved ?? 0;
    k.through = Math.max(k.through, saved ?? k.initial?.() ?? 0, k.inRow ? this.rowCursor : 0);
  }

  /** Writes the cursors that moved, up to `committed` (inside the caller's transaction); the in-row one only when `all`. */
  saveMoved(state: CursorState, committed: number, all: boolean): void {
    for (const k of this.byName.values()) {
      const through = Math.min(k.through, committed);
      if (through === k.saved || (k.inRow && !all)) continue;
      state.set(stateKey(k), through);
      k.saved = through;
    }
  }

  /** Through where rows may go: what every consumer has (nothing while there is none yet). */
  floor(committed: number): number {
    let floor = this.byName.size ? committed : 0;
    for (const k of this.byName.values()) floor = Math.min(floor, k.through);
    return floor;
  }

  /** Rows through `through` were dropped unsent: every cursor passes them. */
  skip(through: number): void {
    for (const k of this.byName.values()) k.through = Math.max(through, k.through);
  }
}
