// Composition root: builds every part from the config and owns their start/stop order.
// Parts are started in the order they are added and stopped in reverse. Constructors
// take the StoragePart (not the db) and reach `storage.db` only in start().
import type { Config } from "./config/schema.js";
import { Lifecycle, type Part } from "./lifecycle.js";
import type { Logger } from "./log.js";
import type { ModuleMigrations } from "./storage/db.js";
import { StoragePart } from "./storage/part.js";
import { SAMPLE_MIGRATIONS, SampleStore } from "./telemetry/sample-store.js";
import { OUTBOX_MIGRATIONS, Uplink } from "./uplink/uplink.js";

/** Every module's migrations; the order here is the order they are applied in. */
export const ALL_MIGRATIONS: ModuleMigrations[] = [SAMPLE_MIGRATIONS, OUTBOX_MIGRATIONS];

export interface Daemon {
  readonly config: Config;
  readonly storage: StoragePart;
  /** Every part by name, for tests and the health endpoint. */
  readonly parts: ReadonlyMap<string, Part>;
  part<T extends Part>(name: string): T;
  start(): Promise<void>;
  stop(): Promise<void>;
}

export function buildDaemon(config: Config, log: Logger): Daemon {
  const life = new Lifecycle(log);
  const parts = new Map<string, Part>();
  const add = <T extends Part>(p: T): T => {
    parts.set(p.name, p);
    return life.add(p);
  };
  const storage = add(new StoragePart(config.data_dir, ALL_MIGRATIONS, log.child({ part: "storage" })));

  // == modbus engine (buses, transports) ==

  // == device registry (persisted; applies config.devices at start) ==

  // == sample store + uplink (outbox, data push) ==
  const samples = add(
    new SampleStore(storage, { retentionBytes: config.telemetry.retention_max_mb * 1024 * 1024, log: log.child({ part: "samples" }) }),
  );
  const uplink = add(new Uplink(config, storage, samples, log.child({ part: "uplink" })));
  void uplink;

  // == telemetry poller ==

  // == partner API (last: it answers only once everything behind it runs) ==

  return {
    config,
    storage,
    parts,
    part<T extends Part>(name: string): T {
      const p = parts.get(name);
      if (!p) throw new Error(`no part named ${name}`);
      return p as T;
    },
    start: () => life.start(),
    stop: () => life.stop(),
  };
}
