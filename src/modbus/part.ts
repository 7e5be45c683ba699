// The Modbus engine as a lifecycle part: the buses. Buses open lazily on their first
// request; stop() closes every one. The drivers that use them (devices/pool.ts) are
// built by the composition root, one layer up.
import type { Part } from "../lifecycle.js";
import type { Logger } from "../log.js";
import { BusManager } from "./bus.js";

export class ModbusEngine implements Part {
  readonly name = "modbus";
  readonly buses: BusManager;

  constructor(log: Logger) {
    this.buses = new BusManager(log);
  }

  start(): void {}

  async stop(): Promise<void> {
    await this.buses.closeAll();
  }
}
