// Receipts of a /dr request (B4): each event slot against what the database holds, in
// the caller's transaction: new, changed before its start, cancelled, or refused (a
// change after start, an end in the past, too many open events).
import { SitegateError } from "../errors.js";
import { storageError, type Db } from "../storage/db.js";
import { contentHash, startTooFar, tooLong, toSpec, type DispatchRequest, type EventSpec } from "./request.js";
import { emptyProgress, type EventRow, type EventStore, type OpenBound } from "./store.js";

export interface Receipt {
  event_id: string;
  status: "accepted" | "cancelled";
}

/** What one request changed: its receipts, the rows to bring into memory, the running events it cancelled. */
export interface Staged {
  receipts: Receipt[];
  touched: EventRow[];
  stopRunning: EventRow[];
}

/** One request's outcome in a group commit. */
export interface BatchOutcome {
  staged?: Staged;
  error?: unknown;
}

export type BatchTx = (batch: ReadonlyArray<{ req: DispatchRequest }>, now: number, out: BatchOutcome[]) => void;

/**
 * The group commit's transaction, made once (better-sqlite3 builds five wrappers per
 * db.transaction() call): each request of the batch in a savepoint of its own, so one
 * request's 409 or 400 never touches another's receipts.
 */
export function batchTransaction(db: Db, stage: (req: DispatchRequest, now: number) => Staged): BatchTx {
  const inner = db.transaction((req: DispatchRequest, at: number) => stage(req, at));
  return db.transaction((reqs: ReadonlyArray<{ req: DispatchRequest }>, at: number, results: BatchOutcome[]) => {
    for (const b of reqs) {
      try {
        results.push({ staged: inner(b.req, at) });
      } catch (e) {
        results.push({ error: storageError(e) }); // a deferred BEGIN meets a held lock at the first write
      }
    }
  });
}

export interface StageDeps {
  store: EventStore;
  bound: OpenBound;
  /** Told of every state an event enters, inside the transaction. */
  onState?: (event: EventSpec, state: EventRow["state"], at: number) => void;
}

/**
 * Decides and writes one request's receipts inside the caller's transaction (the
 * dispatcher's memory follows once it commits). Throws INVALID_REQUEST or CONFLICT; the
 * transaction then rolls back what the request stored.
 */
export function stageRequest(req: DispatchRequest, now: number, deps: StageDeps): Staged {
  const { store, bound, onState } = deps;
  const staged: Staged = { receipts: [], touched: [], stopRunning: [] };
  let added = 0;
  req.event_slots.forEach((input, i) => {
    const spec = toSpec(input, req.mode);
    const hash = contentHash(spec);
    // The database, not memory: an earlier request of the same batch may have changed it.
    const old = store.get(spec.event_id);
    if (old && old.content_hash === hash) {
      staged.receipts.push({ event_id: input.event_id, status: old.receipt });
      return;
    }
    // A cancelled event stays cancelled: a late retry of the original request must not revive it.
    if (old && old.state === "cancelled") {
      staged.receipts.push({ event_id: input.event_id, status: "cancelled" });
      return;
    }
    if (spec.end_ms <= now && !(old && spec.cancelled)) {
      throw new SitegateError("INVALID_REQUEST", "the request body is invalid; nothing was stored", {
        details: [{ path: `event_slots[${i}].end_time`, message: "must be in the future" }],
      });
    }
    // An older version's far or long event can still be cancelled.
    const far = old && spec.cancelled ? null : (startTooFar(spec, now, i) ?? tooLong(spec, i));
    if (far) throw far;
    if (!old) {
      const row = newRow(spec, hash, now);
      if (row.state === "scheduled") added++;
      store.put(row, null); // no row: the look-up above found none
      onState?.(row.spec, row.state, now);
      staged.touched.push(row);
      staged.receipts.push({ event_id: input.event_id, status: row.receipt });
      return;
    }
    if (spec.cancelled) {
      if (old.state === "scheduled") {
        const row: EventRow = { ...old, spec, content_hash: hash, state: "cancelled", receipt: "cancelled", updated_at: now };
        store.put(row, old);
        onState?.(row.spec, row.state, now);
        staged.touched.push(row);
      } else if (old.state === "running") {
        const row: EventRow = {
          ...old,
          content_hash: hash,
          receipt: "cancelled",
          spec: { ...old.spec, cancelled: true },
          updated_at: now,
        };
        store.put(row, old);
        staged.stopRunning.push(row);
      } else {
        throw new SitegateError("CONFLICT", `event ${spec.event_id} already ended (${old.state}); it cannot be cancelled`, {
          details: [{ path: `event_slots[${i}].cancelled`, message: `event already ${old.state}` }],
        });
      }
      staged.receipts.push({ event_id: input.event_id, status: "cancelled" });
      return;
    }
    if (old.state !== "scheduled" || old.spec.start_ms <= now) {
      throw new SitegateError("CONFLICT", `event ${spec.event_id} has started; it can no longer be changed, only cancelled`, {
        details: [
          {
            path: `event_slots[${i}]`,
            message: `event ${old.state === "scheduled" ? "is starting" : `is ${old.state}`}; changes after start are refused`,
          },
        ],
      });
    }
    const row = newRow(spec, hash, now, old.created_at);
    store.put(row, old);
    onState?.(row.spec, row.state, now);
    staged.touched.push(row);
    staged.receipts.push({ event_id: input.event_id, status: "accepted" });
  });
  const over = added > 0 ? bound.add(added) : null; // thrown: the transaction rolls back what this request stored
  if (over) throw over;
  return staged;
}

export function newRow(spec: EventSpec, hash: string, now: number, createdAt = now): EventRow {
  const cancelled = spec.cancelled;
  return {
    spec,
    content_hash: hash,
    state: cancelled ? "cancelled" : "scheduled",
    receipt: cancelled ? "cancelled" : "accepted",
    started_at: null,
    ended_at: null,
    progress: emptyProgress(),
    result: null,
    created_at: createdAt,
    updated_at: now,
  };
}
