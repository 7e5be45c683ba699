// Composition root: builds every part from the config and owns their start/stop order.
//   storage -> (modbus buses -> devices -> telemetry poller) -> (uplink) -> (api)
// Each module contributes its migrations to ALL_MIGRATIONS and its part to build().
import type { Config } from "./config/schema.js";
import { Lifecycle } from "./lifecycle.js";
import type { Logger } from "./log.js";
import type { ModuleMigrations } from "./storage/db.js";
import { StoragePart } from "./storage/part.js";

/** Every module's migrations; the order here is the order they are applied in. */
export const ALL_MIGRATIONS: ModuleMigrations[] = [];

export interface Daemon {
  readonly storage: StoragePart;
  start(): Promise<void>;
  stop(): Promise<void>;
}

export function buildDaemon(config: Config, log: Logger): Daemon {
  const life = new Lifecycle(log);
  const storage = life.add(new StoragePart(config.data_dir, ALL_MIGRATIONS, log.child({ part: "storage" })));
  return {
    storage,
    start: () => life.start(),
    stop: () => life.stop(),
  };
}
