// Commits that must survive a power cut (receipts, results, ledger rows) run with
// synchronous=FULL; telemetry stays at NORMAL to spare the SD card.
import type { Db } from "../storage/db.js";

export function withFullSync(db: Db, tx: () => void): void {
  db.pragma("synchronous = FULL");
  try {
    tx();
  } finally {
    db.pragma("synchronous = NORMAL");
  }
}
