// The databases as a lifecycle part: opened and migrated first, closed last. Two files in
// the data dir: sitegate.db (receipts, events, ledger, delivery log, configuration: readable by
// the CLI while the daemon runs) and telemetry.db (the telemetry buffer, module
// "telemetry": written every commit interval, tuned for the SD card, held exclusively; the
// sample store moves telemetry an older release kept in sitegate.db).
import type { Part } from "../lifecycle.js";
import { openDatabase, migrate, preallocateWal, TELEMETRY_DB_FILE, type Db, type ModuleMigrations } from "./db.js";
import type { Logger } from "../log.js";
import { SitegateError } from "../errors.js";

/** The module whose tables live in telemetry.db. */
export const TELEMETRY_MODULE = "telemetry";

export class StoragePart implements Part {
  readonly name = "storage";
  private handle: Db | null = null;
  private telemetryHandle: Db | null = null;
  private lastCommit = 0;
  private lastFailure = 0;

  constructor(
    private readonly dataDir: string,
    private readonly migrations: ModuleMigrations[],
    private readonly log: Logger,
  ) {}

  get db(): Db {
    if (!this.handle) throw new SitegateError("INTERNAL", "storage is not started");
    return this.handle;
  }

  /** telemetry.db (opened with the part when a telemetry module is among the migrations). */
  get telemetryDb(): Db {
    if (!this.telemetryHandle) throw new SitegateError("INTERNAL", "storage is not started, or has no telemetry module");
    return this.telemetryHandle;
  }

  /** A part committed a transaction: the data dir takes writes (the health check need not write its own probe). */
  noteCommit(at = performance.now()): void {
    this.lastCommit = at;
  }

  /** A part could not commit (the health check then probes, and reports why). */
  noteCommitFailed(at = performance.now()): void {
    this.lastFailure = at;
  }

  /** performance.now() of the last commit a part reported, if none failed since; 0 otherwise. */
  get lastCommitAt(): number {
    return this.lastCommit > this.lastFailure ? this.lastCommit : 0;
  }

  start(): void {
    this.handle = openDatabase(this.dataDir);
    const telemetry = this.migrations.filter((m) => m.module === TELEMETRY_MODULE);
    let walPreallocated = 0;
    let ran = migrate(
      this.handle,
      this.migrations.filter((m) => m.module !== TELEMETRY_MODULE),
    );
    if (telemetry.length) {
      this.telemetryHandle = openDatabase(this.dataDir, TELEMETRY_DB_FILE, { pageSize: 1024, autoVacuum: "NONE", exclusive: true });
      ran += migrate(this.telemetryHandle, telemetry);
      // Its WAL at its working size now, so that commits overwrite blocks in place (db.ts).
      walPreallocated = preallocateWal(this.telemetryHandle);
    }
    this.log.info({ data_dir: this.dataDir, migrations_applied: ran, wal_preallocated: walPreallocated }, "database ready");
  }

  stop(): void {
    // Fold the WALs back into the main files so a stopped gateway leaves clean files.
    for (const h of [this.telemetryHandle, this.handle]) {
      if (!h) continue;
      h.pragma("wal_checkpoint(TRUNCATE)");
      h.pragma("optimize");
      h.close();
    }
    this.handle = this.telemetryHandle = null;
  }
}
