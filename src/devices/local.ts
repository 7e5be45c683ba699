// Devices that are not on a Modbus bus (Zigbee through zigbee2mqtt, GPIO lines): what
// each transport family (zigbee/, gpio/) offers of them, by role, and one view over all
// of them for telemetry, dispatch, device sync and the status page. Declared in the
// config file, so they need neither pairing nor the registry.
import { opModeCode, type Role } from "../model/roles.js";
import type { DeviceDescriptor, DeviceHealth, Metrics } from "./types.js";

/** The roles a local device can have (roles.ts). */
export type LocalRole = Extract<Role, "switch" | "thermostat" | "input">;

/** What a local device takes from its config entry, whatever its transport: each transport's device class extends it. */
export abstract class DeclaredDevice {
  readonly device_id: string;
  readonly device_name?: string;
  /** The load a shed of it removes when it has no metering of its own (W). */
  readonly rated_power_w?: number;
  readonly shed_priority?: number;
  /** Thermostat: how far a shed lowers the heating setpoint (°C). */
  readonly setback_c?: number;

  constructor(entry: Pick<DeclaredDevice, "device_id"> & Partial<DeclaredDevice>) {
    this.device_id = entry.device_id;
    this.device_name = entry.device_name;
    this.rated_power_w = entry.rated_power_w;
    this.shed_priority = entry.shed_priority;
    this.setback_c = entry.setback_c;
  }
}

export interface LocalDevice extends DeclaredDevice {
  readonly role: LocalRole;
  /** What it is and what device sync publishes (role and its code, maximum power, capabilities). */
  descriptor(): DeviceDescriptor;
  /** Where the device is reached, for the status page (e.g. "zigbee2mqtt/washer-plug"). */
  address(): string;
  health(): DeviceHealth;
  /** The latest value of every metric (empty before the first reading). */
  latest(): Metrics;
  /** switch: whether it is on (asks the device when no state is known yet). */
  readOn?(): Promise<boolean>;
  /** switch: switches it, resolving once the device confirms; throws a SitegateError otherwise. */
  setOn?(on: boolean): Promise<void>;
  /** thermostat: the heating setpoint (°C). */
  readSetpoint?(): Promise<number>;
  /** thermostat: sets the heating setpoint (°C), resolving once the device confirms. */
  setSetpoint?(c: number): Promise<void>;
}

/** One transport family's devices (a zigbee2mqtt bridge, a GPIO chip). */
export interface LocalFamily {
  devices(): readonly LocalDevice[];
}

const NO_HEALTH: DeviceHealth = {
  online: false,
  last_ok_at: null,
  last_error: null,
  consecutive_failures: 0,
  op_mode: opModeCode("unknown"),
};

/** Every local device of every family, by device_id. */
export class LocalDevices {
  private readonly families: LocalFamily[] = [];
  private readonly remote = new Set<string>();

  add(f: LocalFamily): void {
    this.families.push(f);
  }

  list(): LocalDevice[] {
    return this.families.flatMap((f) => f.devices());
  }

  get(deviceId: string): LocalDevice | undefined {
    return this.list().find((d) => d.device_id === deviceId);
  }

  /** Health with the remote op mode while dispatch drives the device. */
  health(deviceId: string): DeviceHealth | undefined {
    const d = this.get(deviceId);
    if (!d) return undefined;
    const h = d.health() ?? NO_HEALTH;
    return this.remote.has(deviceId) && h.online ? { ...h, op_mode: opModeCode("remote") } : h;
  }

  latest(deviceId: string): Metrics | undefined {
    return this.get(deviceId)?.latest();
  }

  /** The latest readings of every online device with any: one site tick's share of the snapshot. */
  readings(): Array<{ device_id: string; metrics: Metrics }> {
    const out: Array<{ device_id: string; metrics: Metrics }> = [];
    for (const d of this.list()) {
      const m = d.latest();
      if (d.health().online && Object.keys(m).length > 0) out.push({ device_id: d.device_id, metrics: { ...m } });
    }
    return out;
  }

  setRemote(deviceId: string, remote: boolean): void {
    if (remote) this.remote.add(deviceId);
    else this.remote.delete(deviceId);
  }
}
