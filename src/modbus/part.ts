// The Modbus engine as a lifecycle part: the buses and their figures. Buses open lazily
// on their first request; stop() closes every one. The drivers that use them
// (modbus/device/pool.ts) are built by the composition root, one layer up.
import type { MetricFamily, Part } from "../lifecycle.js";
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

  metrics(): MetricFamily[] {
    const buses = this.buses.all();
    const perBus = (value: (b: (typeof buses)[number]) => number) => buses.map((b) => ({ labels: { bus: b.key }, value: value(b) }));
    return [
      { name: "sitegate_bus_requests_total", help: "Modbus requests sent", type: "counter", values: perBus((b) => b.stats.requests) },
      {
        name: "sitegate_bus_timeouts_total",
        help: "Modbus requests without an answer",
        type: "counter",
        values: perBus((b) => b.stats.timeouts),
      },
      {
        name: "sitegate_bus_busy_seconds_total",
        help: "time the bus spent on requests (rate() is its utilisation)",
        type: "counter",
        values: perBus((b) => b.stats.busy_ms / 1000),
      },
      { name: "sitegate_bus_queue_depth", help: "requests waiting for the bus", type: "gauge", values: perBus((b) => b.queued) },
    ];
  }
}
