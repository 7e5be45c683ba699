// `sitegate devices release ID [--forget]` and the running daemon: the command puts its
// request in the database (WAL, committed with synchronous=FULL), the dispatcher takes it
// at its next telemetry snapshot (about once per poll interval), retries the release at
// once (or drops the ledger row, for --forget) and writes its answer in the same row,
// which the command waits for.
import { errorMessage } from "../errors.js";
import type { HealthWarning } from "../metrics.js";
import type { Db } from "../storage/db.js";
import type { Ledger } from "./ledger.js";
import { withFullSync } from "../storage/durable.js";

export const RELEASE_REQUEST_SQL = `
  CREATE TABLE dp_release_request (
    id INTEGER PRIMARY KEY,
    device_id TEXT NOT NULL,
    action TEXT NOT NULL CHECK (action IN ('release', 'forget')),
    asked_at INTEGER NOT NULL,
    answered_at INTEGER,
    answer TEXT
  );
`;

export type ReleaseAction = "release" | "forget";

export interface ReleaseRequest {
  id: number;
  device_id: string;
  action: ReleaseAction;
  asked_at: number;
  answered_at: number | null;
  answer: string | null;
}

/** At most this many requests are taken per snapshot; the rest wait for the next one. */
const TAKE_MAX = 8;
/** Answered requests are kept this long (the command reads its answer), then swept. */
const KEEP_ANSWERED_MS = 86_400_000;

export function askRelease(db: Db, deviceId: string, action: ReleaseAction, now: number): number {
  return withFullSync(db, () =>
    Number(
      db.prepare("INSERT INTO dp_release_request (device_id, action, asked_at) VALUES (?, ?, ?)").run(deviceId, action, now)
        .lastInsertRowid,
    ),
  );
}

export function releaseRequest(db: Db, id: number): ReleaseRequest | undefined {
  return db.prepare("SELECT * FROM dp_release_request WHERE id = ?").get(id) as ReleaseRequest | undefined;
}

/** The daemon's side: the open requests in the order they were made, prepared once. */
export class ReleaseRequests {
  private readonly stmts;

  constructor(db: Db) {
    this.stmts = {
      open: db.prepare(`SELECT * FROM dp_release_request WHERE answered_at IS NULL ORDER BY id LIMIT ${TAKE_MAX}`),
      answer: db.prepare("UPDATE dp_release_request SET answered_at = ?, answer = ? WHERE id = ?"),
      sweep: db.prepare("DELETE FROM dp_release_request WHERE answered_at IS NOT NULL AND answered_at < ?"),
    };
  }

  open(): ReleaseRequest[] {
    return this.stmts.open.all() as ReleaseRequest[];
  }

  answer(id: number, answer: string, now: number): void {
    this.stmts.answer.run(now, answer, id);
    this.stmts.sweep.run(now - KEEP_ANSWERED_MS);
  }
}

/** What the dispatcher's executor offers the requests. */
export interface ReleaseTarget {
  releaseNow(deviceId: string): Promise<string>;
  forget(deviceId: string): string;
}

/** Takes the open requests: a release is tried at once, a forget drops the row; each answered in its row. */
export function answerReleaseRequests(requests: ReleaseRequests, target: ReleaseTarget, now: number): void {
  for (const q of requests.open()) {
    const answer = (text: string) => requests.answer(q.id, text, now);
    if (q.action === "forget") answer(target.forget(q.device_id));
    else {
      answer("taken"); // not taken twice while the release runs
      void target.releaseNow(q.device_id).then(
        (text) => requests.answer(q.id, text, now),
        (e: unknown) => requests.answer(q.id, `not released: ${errorMessage(e)}`, now),
      );
    }
  }
}

/** /healthz: one warning per device whose release did not read back. */
export function unreleasedWarnings(ledger: Ledger): HealthWarning[] {
  return ledger.unreleased().map((r) => ({
    code: "device_unreleased",
    message: `device ${r.device_id} is not released (${r.unreleased ?? ""}); retried with backoff, or \`sitegate devices release ${r.device_id}\``,
  }));
}
