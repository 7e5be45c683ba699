// A fourth transport family that exists only in the tests: thermometers whose sensor is a
// number in memory. It reads its devices on the site clock's tick like the Modbus family
// does (an asynchronous read per tick), and is registered in one line beside the
// product's families: `{ families: [...FAMILIES, thermometers(sensors)] }` (DaemonOptions).
// Nothing in src knows it: the site clock, the registry, /healthz, the STATUS line and the
// health monitor take it as they take the others.
import type { DeviceFamily, Reading, TickReadings } from "../../../src/devices/family.js";
import type { Device, DeviceDescriptor, DeviceHealth, DeviceInfo, Metrics, PreState } from "../../../src/model/device.js";
import type { FamilyFactory } from "../../../src/parts/families.js";

/** The sensors: temperature by device id; a missing one does not answer. */
export type Sensors = Map<string, number>;

const NEVER: DeviceHealth = { online: false, last_ok_at: null, last_error: null, consecutive_failures: 0, op_mode: 0 };

export class Thermometer implements Device {
  private last: Metrics = {};
  private state: DeviceHealth = NEVER;
  constructor(readonly id: string) {}
  info(): DeviceInfo {
    return { device_id: this.id, family: "thermometer", address: `thermometer/${this.id}`, fully_configured: true };
  }
  descriptor(): DeviceDescriptor {
    return { role: "unknown", device_type: 0, capabilities: ["telemetry"], profile: "thermometer", identity: {} };
  }
  latest(): Metrics {
    return this.last;
  }
  health(): DeviceHealth {
    return this.state;
  }
  /** One read of the sensor: the tick's reading, or the device goes offline. */
  took(temperature: number | undefined, ts: number): Reading | null {
    if (temperature === undefined) {
      const failures = this.state.consecutive_failures + 1;
      this.state = { ...this.state, online: false, last_error: "no answer", consecutive_failures: failures, op_mode: 0 };
      return null;
    }
    this.last = { temperature_c: temperature };
    this.state = { online: true, last_ok_at: new Date(ts).toISOString(), last_error: null, consecutive_failures: 0, op_mode: 1 };
    return { device_id: this.id, metrics: { ...this.last } };
  }
  async capture(): Promise<PreState> {
    return {};
  }
  async revert(): Promise<void> {}
  async verify(): Promise<string | undefined> {
    return undefined;
  }
  setRemote(): void {}
}

export class Thermometers implements DeviceFamily {
  readonly family = "thermometer";
  /** The tick times it was asked to read at. */
  readonly ticks: number[] = [];
  private readonly list: Thermometer[];
  constructor(private readonly sensors: Sensors) {
    this.list = [...sensors.keys()].map((id) => new Thermometer(id));
  }
  devices(): readonly Thermometer[] {
    return this.list;
  }
  read(ts: number): TickReadings {
    this.ticks.push(ts);
    const readings = Promise.resolve().then(() => this.list.flatMap((t) => t.took(this.sensors.get(t.id), ts) ?? []));
    return [{ source: "thermometers", readings }];
  }
}

/** The family's factory entry; `made` gets the family the daemon built. */
export function thermometers(sensors: Sensors, made?: (f: Thermometers) => void): FamilyFactory {
  return () => {
    const f = new Thermometers(sensors);
    made?.(f);
    return f;
  };
}
