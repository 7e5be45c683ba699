// Commits that must survive a power cut (receipts, results, ledger rows) run with
// synchronous=FULL; telemetry stays at NORMAL to spare the SD card.
import type { Statement } from "better-sqlite3";
import type { Db } from "../storage/db.js";

// The two pragmas as prepared statements, once per connection: db.pragma() prepares its
// statement again on every call, twice per receipt commit.
const pragmas = new WeakMap<Db, { full: Statement; normal: Statement }>();

export function withFullSync(db: Db, tx: () => void): void {
  let p = pragmas.get(db);
  if (!p) pragmas.set(db, (p = { full: db.prepare("PRAGMA synchronous = FULL"), normal: db.prepare("PRAGMA synchronous = NORMAL") }));
  p.full.run();
  try {
    tx();
  } finally {
    p.normal.run();
  }
}
