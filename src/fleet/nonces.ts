// The nonces of signed commands (table fl_nonce, fleet/migrations.ts): each committed
// before its command runs, so that a replay, even after a restart, is refused.
import type { Db } from "../storage/db.js";
import type { StoragePart } from "../storage/part.js";
import { commitDurably } from "../storage/durable.js";

/** Unexpired nonces kept at most: 10,000 in 300 s is 33 signed commands a second. */
export const MAX_NONCES = 10_000;

/** The nonces of signed commands: a replay, even after a restart, finds its nonce here. */
export class NonceStore {
  private stmts: ReturnType<NonceStore["prepare"]> | null = null;

  /** Lazy: prepared on first use, after storage has started. */
  constructor(private readonly storage: StoragePart) {}

  private prepare(db: Db) {
    return {
      pruneNonces: db.prepare("DELETE FROM fl_nonce WHERE expires_at < ?"),
      countNonces: db.prepare("SELECT count(*) FROM fl_nonce").pluck(),
      addNonce: db.prepare("INSERT OR IGNORE INTO fl_nonce (nonce, expires_at) VALUES (?, ?)"),
    };
  }

  private get s() {
    this.stmts ??= this.prepare(this.storage.db);
    return this.stmts;
  }

  /**
   * Records a signed command's nonce, committed before the command runs. "replayed" when
   * it was seen before; "full" when MAX_NONCES unexpired nonces are kept (bounded table).
   * Throws if SQLite cannot commit (the command must not run then either).
   */
  claimNonce(nonce: string, expiresAt: number, now: number): "ok" | "replayed" | "full" {
    const s = this.s;
    return commitDurably(this.storage.db, () => {
      s.pruneNonces.run(now);
      if ((s.countNonces.get() as number) >= MAX_NONCES) return "full";
      return s.addNonce.run(nonce, expiresAt).changes === 1 ? "ok" : "replayed";
    });
  }

  /** Forgets prepared statements (the database was closed). */
  reset(): void {
    this.stmts = null;
  }
}
