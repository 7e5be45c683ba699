// The databases as a lifecycle part: opened and migrated first, closed last. Two files in
// the data dir: sitegate.db (receipts, events, ledger, outbox, configuration: readable by
// the CLI while the daemon runs) and telemetry.db (the telemetry buffer, module
// "telemetry": written every commit interval, tuned for the SD card, held exclusively).
import type { Part } from "../lifecycle.js";
import { openDatabase, migrate, TELEMETRY_DB_FILE, type Db, type ModuleMigrations } from "./db.js";
import type { Logger } from "../log.js";

/** The module whose tables live in telemetry.db. */
export const TELEMETRY_MODULE = "telemetry";
const TELEMETRY_TABLES = ["tm_snapshot", "tm_series", "tm_state"];

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
    if (!this.handle) throw new Error("storage is not started");
    return this.handle;
  }

  /** telemetry.db (opened with the part when a telemetry module is among the migrations). */
  get telemetryDb(): Db {
    if (!this.telemetryHandle) throw new Error("storage is not started, or has no telemetry module");
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
    let ran = migrate(this.handle, this.migrations.filter((m) => m.module !== TELEMETRY_MODULE));
    if (telemetry.length) {
      this.telemetryHandle = openDatabase(this.dataDir, TELEMETRY_DB_FILE, { pageSize: 1024, autoVacuum: "NONE", exclusive: true });
      ran += migrate(this.telemetryHandle, telemetry);
      this.moveTelemetry(this.handle, this.telemetryHandle);
    }
    this.log.info({ data_dir: this.dataDir, migrations_applied: ran }, "database ready");
  }

  /**
   * Releases before telemetry.db kept the telemetry buffer in sitegate.db (schema version 1):
   * its rows move over once, in one transaction of telemetry.db marked `imported`, then the
   * old tables go. A crash in between moves nothing twice.
   */
  private moveTelemetry(main: Db, tele: Db): void {
    const old = main.prepare("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'tm_snapshot'").pluck().get() as number;
    if (!old) return;
    const imported = tele.prepare("SELECT value FROM tm_state WHERE key = 'imported'").pluck().get() as number | undefined;
    if (!imported) {
      const file = main.name;
      tele.prepare("ATTACH DATABASE ? AS old").run(file);
      try {
        tele.transaction(() => {
          tele.exec(`
            INSERT INTO main.tm_series (id, device_id, metric) SELECT id, device_id, metric FROM old.tm_series;
            INSERT INTO main.tm_snapshot (id, ts, n, data) SELECT id, ts, n, data FROM old.tm_snapshot;
            INSERT INTO main.tm_state (key, value) SELECT key, value FROM old.tm_state WHERE true
              ON CONFLICT (key) DO UPDATE SET value = excluded.value;
            INSERT INTO main.tm_state (key, value) VALUES ('last_id', max((SELECT coalesce(max(seq), 0) FROM old.sqlite_sequence WHERE name = 'tm_snapshot'), (SELECT coalesce(max(id), 0) FROM old.tm_snapshot)))
              ON CONFLICT (key) DO UPDATE SET value = excluded.value;
            INSERT INTO main.tm_state (key, value) VALUES ('imported', 1);
          `);
        })();
      } finally {
        tele.exec("DETACH DATABASE old");
      }
    }
    main.transaction(() => {
      for (const t of TELEMETRY_TABLES) main.exec(`DROP TABLE IF EXISTS ${t}`);
      main.prepare("DELETE FROM schema_migrations WHERE module = ?").run(TELEMETRY_MODULE);
    })();
    this.log.info({ from: main.name, to: tele.name }, "telemetry buffer moved to its own database");
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
