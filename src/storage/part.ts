// The database as a lifecycle part: opened and migrated first, closed last.
import type { Part } from "../lifecycle.js";
import { openDatabase, migrate, type Db, type ModuleMigrations } from "./db.js";
import type { Logger } from "../log.js";

export class StoragePart implements Part {
  readonly name = "storage";
  private handle: Db | null = null;

  constructor(
    private readonly dataDir: string,
    private readonly migrations: ModuleMigrations[],
    private readonly log: Logger,
  ) {}

  get db(): Db {
    if (!this.handle) throw new Error("storage is not started");
    return this.handle;
  }

  start(): void {
    this.handle = openDatabase(this.dataDir);
    const ran = migrate(this.handle, this.migrations);
    this.log.info({ data_dir: this.dataDir, migrations_applied: ran }, "database ready");
  }

  stop(): void {
    if (!this.handle) return;
    // Fold the WAL back into the main file so a stopped gateway leaves one clean file.
    this.handle.pragma("wal_checkpoint(TRUNCATE)");
    this.handle.pragma("optimize");
    this.handle.close();
    this.handle = null;
  }
}
