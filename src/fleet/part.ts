// The fleet uplink as a lifecycle part. MQTT.js costs about 15 MiB of resident memory, so
// the Fleet (and MQTT.js with it) is loaded only when the part starts, which it does only
// when a fleet is configured.
import type { MetricFamily, Part, PartHealth } from "../lifecycle.js";
import type { Route } from "../delivery/log.js";
import type { Fleet, FleetDeps } from "./fleet.js";

export class FleetPart implements Part {
  readonly name = "fleet";
  private fleet: Fleet | null = null;

  constructor(private readonly deps: FleetDeps) {}

  /** The running Fleet (null before start). */
  get current(): Fleet | null {
    return this.fleet;
  }

  async start(): Promise<void> {
    const { Fleet } = await import("./fleet.js");
    this.fleet = new Fleet(this.deps);
    this.fleet.start();
  }

  async stop(): Promise<void> {
    await this.fleet?.stop();
  }

  samplesAppended(): void {
    this.fleet?.samplesAppended();
  }

  messagesAppended(routes: readonly Route[]): void {
    this.fleet?.messagesAppended(routes);
  }

  devicesChanged(): void {
    this.fleet?.devicesChanged();
  }

  health(): PartHealth {
    return this.fleet?.health() ?? { warnings: [] };
  }

  metrics(): MetricFamily[] {
    return this.fleet?.gauges() ?? [];
  }
}
