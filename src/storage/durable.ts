// Durable commits: what a caller is told is done (a receipt, a configuration, a nonce, a
// revocation) is committed with synchronous=FULL, so the WAL is fsynced before the commit
// returns and a power cut cannot roll it back; so is each telemetry commit (one per
// commit_interval_s, the stated loss window). Every other commit stays at the connection's
// NORMAL (synced only at a checkpoint). docs/sd-card.md lists which writes take which path.
import { storageWrite, type Db } from "./db.js";

/**
 * Runs `tx` (one statement, or a db.transaction() of several) with synchronous=FULL. When
 * SQLite cannot commit (disk full, locked, read-only, I/O error) it throws
 * STORAGE_UNAVAILABLE, and nothing of `tx` is stored.
 */
export function withFullSync<T>(db: Db, tx: () => T): T {
  // exec, not cached prepared statements: SQLite applies `PRAGMA synchronous` when the
  // statement is prepared, so a cached NORMAL prepared after a cached FULL left the first
  // commit of each connection unsynced.
  return storageWrite(() => {
    db.exec("PRAGMA synchronous = FULL");
    try {
      return tx();
    } finally {
      db.exec("PRAGMA synchronous = NORMAL");
    }
  });
}

/** Runs `fn` in one IMMEDIATE transaction and returns once it is on the disk (fsynced). */
export function commitDurably<T>(db: Db, fn: () => T): T {
  return withFullSync(db, () => db.transaction(fn).immediate());
}
