// The Modbus engine as a lifecycle part: the buses, the profiles and the driver pool.
// Buses open lazily on their first request; stop() closes every one.
import type { Config } from "../config/schema.js";
import type { Part } from "../lifecycle.js";
import type { Logger } from "../log.js";
import { DriverPool } from "../devices/pool.js";
import { builtinProfiles, type ProfileRegistry } from "../profiles/registry.js";
import { BusManager } from "./bus.js";

export class ModbusEngine implements Part {
  readonly name = "modbus";
  readonly buses: BusManager;
  readonly profiles: ProfileRegistry;
  readonly pool: DriverPool;

  constructor(config: Config, log: Logger, profiles: ProfileRegistry = builtinProfiles()) {
    this.buses = new BusManager(log);
    this.profiles = profiles;
    this.pool = new DriverPool(this.buses, profiles, config.rtu_ports);
  }

  start(): void {}

  async stop(): Promise<void> {
    await this.buses.closeAll();
  }
}
