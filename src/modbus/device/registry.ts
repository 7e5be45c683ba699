// The persisted device registry: one row per device_id (replace, never duplicate), its
// configuration as submitted, what pairing found, and whether the check writes passed;
// and which config-file entry was last applied to each device (dv_config_applied).
// The Modbus family (its devices and polling) and device sync read it; every change is
// announced through the one function the composition root gives it, and moves `version`.
import type { DeviceConfig } from "../config-schema.js";
import type { Part } from "../../lifecycle.js";
import type { Db, ModuleMigrations } from "../../storage/db.js";
import type { StoragePart } from "../../storage/part.js";
import { commitDurably } from "../../storage/durable.js";
import { roleOfWire } from "../../model/roles.js";
import type { DeviceDescriptor } from "../../model/device.js";
import type { DeviceSource, RegisteredDevice } from "./types.js";

export const REGISTRY_MIGRATIONS: ModuleMigrations = {
  module: "devices",
  migrations: [
    {
      version: 1,
      sql: `CREATE TABLE dv_device (
        device_id TEXT PRIMARY KEY,
        config TEXT NOT NULL,
        descriptor TEXT,
        fully_configured INTEGER NOT NULL,
        updated_at TEXT NOT NULL
      ) WITHOUT ROWID`,
    },
    {
      // Which content of a config-file device entry was last applied (config-devices.ts).
      version: 2,
      sql: `CREATE TABLE dv_config_applied (
        device_id TEXT PRIMARY KEY,
        hash TEXT NOT NULL,
        applied_at TEXT NOT NULL
      ) WITHOUT ROWID`,
    },
  ],
};

/** A descriptor stored by a release that recorded only the wire device_type gets its role from it. */
function withRole(d: Omit<DeviceDescriptor, "role"> & { role?: DeviceDescriptor["role"] }): DeviceDescriptor {
  return { ...d, role: d.role ?? roleOfWire(d.device_type) };
}

export class DeviceRegistry implements DeviceSource, Part {
  readonly name = "registry";
  private db!: Db;
  private cache = new Map<string, RegisteredDevice>();
  private changes = 0;

  constructor(
    private readonly storage: StoragePart,
    /** Called after every committed change (the composition root's `devices_changed`). */
    private readonly changed: () => void = () => {},
  ) {}

  /** Goes up by one with every committed change: a cache of a view of the devices keys on it. */
  get version(): number {
    return this.changes;
  }

  start(): void {
    this.db = this.storage.db;
    this.cache.clear();
    const rows = this.db
      .prepare("SELECT device_id, config, descriptor, fully_configured, updated_at FROM dv_device ORDER BY device_id")
      .all() as Array<{
      device_id: string;
      config: string;
      descriptor: string | null;
      fully_configured: number;
      updated_at: string;
    }>;
    for (const r of rows) {
      this.cache.set(r.device_id, {
        config: JSON.parse(r.config) as DeviceConfig,
        descriptor: r.descriptor ? withRole(JSON.parse(r.descriptor) as DeviceDescriptor) : null,
        fully_configured: r.fully_configured === 1,
        updated_at: r.updated_at,
      });
    }
    this.changes++; // the list is the stored one now: a view built before start is stale
  }

  stop(): void {}

  list(): RegisteredDevice[] {
    return [...this.cache.values()];
  }

  get(deviceId: string): RegisteredDevice | undefined {
    return this.cache.get(deviceId);
  }

  /** Commits the device (replacing any with the same device_id), then announces the change. */
  put(config: DeviceConfig, descriptor: DeviceDescriptor | null, fullyConfigured: boolean): RegisteredDevice {
    const updated_at = new Date().toISOString();
    // Durable: the configure answer that follows tells the caller the device is stored.
    const upsert = this.db.prepare(
      `INSERT INTO dv_device (device_id, config, descriptor, fully_configured, updated_at) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (device_id) DO UPDATE SET config = excluded.config, descriptor = excluded.descriptor,
           fully_configured = excluded.fully_configured, updated_at = excluded.updated_at`,
    );
    commitDurably(this.db, () =>
      upsert.run(
        config.device_id,
        JSON.stringify(config),
        descriptor ? JSON.stringify(descriptor) : null,
        fullyConfigured ? 1 : 0,
        updated_at,
      ),
    );
    const dev: RegisteredDevice = { config, descriptor, fully_configured: fullyConfigured, updated_at };
    this.cache.set(config.device_id, dev);
    this.changes++;
    this.changed();
    return dev;
  }

  /** Hash of the config-file entry last applied to this device_id, if any. */
  appliedConfigHash(deviceId: string): string | undefined {
    const row = this.db.prepare("SELECT hash FROM dv_config_applied WHERE device_id = ?").get(deviceId) as { hash: string } | undefined;
    return row?.hash;
  }

  /** Records that the config file's entry with this hash was applied to the device. */
  markConfigApplied(deviceId: string, hash: string): void {
    this.db
      .prepare(
        `INSERT INTO dv_config_applied (device_id, hash, applied_at) VALUES (?, ?, ?)
         ON CONFLICT (device_id) DO UPDATE SET hash = excluded.hash, applied_at = excluded.applied_at`,
      )
      .run(deviceId, hash, new Date().toISOString());
  }
}
