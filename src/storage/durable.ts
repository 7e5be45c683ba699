// Durable commits: what a caller is told is done (a receipt, a configuration, a nonce, a
// revocation) is committed with synchronous=FULL, so the WAL is fsynced before the commit
// returns and a power cut cannot roll it back. Each telemetry commit (one per
// commit_interval_s, the stated loss window) is synced too, by fdatasync of its WAL after the
// commit (commitThenSyncData). Every other commit stays at the connection's NORMAL (synced
// only at a checkpoint). docs/sd-card.md lists which writes take which path.
import { closeSync, fdatasyncSync, openSync } from "node:fs";
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

/**
 * Runs `tx` at the connection's NORMAL (its frames are written to the WAL, not synced), then
 * syncs the WAL's data with fdatasync: the commit is on the card when this returns, as with
 * FULL. SQLite's FULL calls fsync, which also makes ext4 commit its journal for the WAL's new
 * modification time (a descriptor, the inode's block and a commit block: 12 KiB) inside the
 * commit; with fdatasync the journal writes it at its own next commit (within 5 s), or, on a
 * lazytime mount, keeps it in memory (docs/sd-card.md: the bytes measured the same on a
 * default mount). fdatasync still syncs a size or block change, so a WAL that grows is synced
 * whole. Throws
 * STORAGE_UNAVAILABLE, with nothing stored, when SQLite cannot commit. When only the sync
 * fails the commit stands (SQLite has it, and running it again would store it twice):
 * `syncError` says so, and the caller reports the disk.
 */
export function commitThenSyncData<T>(db: Db, tx: () => T): { value: T; syncError: Error | null } {
  const value = storageWrite(tx);
  try {
    const fd = openSync(`${db.name}-wal`, "r");
    try {
      fdatasyncSync(fd);
    } finally {
      closeSync(fd);
    }
    return { value, syncError: null };
  } catch (e) {
    return { value, syncError: e as Error };
  }
}
