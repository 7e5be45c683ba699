// TEMPORARY: replaced by the registry of the device model (devices/), which owns every
// device with its latest values and health. Until it is merged, this builds the
// `DeviceDirectory` the status page, device sync, /healthz and the fleet read from what
// the daemon has today: the persisted Modbus registry, the poller's health and latest
// values, and the local (Zigbee, GPIO) devices. It is a read side only: the devices it
// hands out refuse capture/restore/verify (dispatch does not go through it).
import type { DeviceConfig } from "../config/device-schema.js";
import { SitegateError } from "../errors.js";
import type { LocalDevice, LocalDevices } from "../devices/local.js";
import type { RegisteredDevice } from "../devices/types.js";
import type { Device, DeviceDescriptor, DeviceDirectory, DeviceHealth, DeviceInfo, Metrics } from "../model/device.js";
import { opModeCode } from "../model/roles.js";

/** What the adapter reads of today's parts. */
export interface DirectorySources {
  registry: { list(): RegisteredDevice[]; get(deviceId: string): RegisteredDevice | undefined; readonly version: number };
  /** Health and latest values of every device, Modbus or local (the poller answers for both). */
  poller: { health(deviceId: string): DeviceHealth | undefined; latest(deviceId: string): Metrics | undefined };
  local?: Pick<LocalDevices, "list" | "get" | "setRemote">;
}

/** Health before the first poll: offline, never answered, op mode unknown. */
const NOT_POLLED: DeviceHealth = {
  online: false,
  last_ok_at: null,
  last_error: null,
  consecutive_failures: 0,
  op_mode: opModeCode("unknown"),
};

/** Where a Modbus device is, as the status page shows it. */
export function modbusAddress(c: DeviceConfig): string {
  return c.mb_type === 2 ? `tcp://${c.mb_ip}:${c.mb_port} unit ${c.mb_slave_id ?? 1}` : `RTU port ${c.mb_rtu_no} unit ${c.mb_slave_id}`;
}

/** The family of a local device, from the profile its descriptor names. */
function localFamily(d: LocalDevice): string {
  const profile = d.descriptor().profile;
  return profile === "zigbee2mqtt" ? "zigbee" : profile;
}

function readOnly(id: string): Promise<never> {
  return Promise.reject(
    new SitegateError("INTERNAL", `device ${id}: the directory adapter is read-only; dispatch writes through its own control`),
  );
}

/** One device read through the sources: `info` and `descriptor` are looked up at each call, so they follow the registry. */
abstract class ReadDevice implements Device {
  constructor(
    readonly id: string,
    protected readonly s: DirectorySources,
  ) {}

  abstract info(): DeviceInfo;
  abstract descriptor(): DeviceDescriptor | null;

  health(): DeviceHealth {
    return this.s.poller.health(this.id) ?? NOT_POLLED;
  }

  latest(): Metrics {
    return this.s.poller.latest(this.id) ?? {};
  }

  capture(): Promise<never> {
    return readOnly(this.id);
  }

  restore(): Promise<never> {
    return readOnly(this.id);
  }

  verify(): Promise<never> {
    return readOnly(this.id);
  }

  abstract setRemote(remote: boolean): void;
}

class ModbusEntry extends ReadDevice {
  private entry(): RegisteredDevice | undefined {
    return this.s.registry.get(this.id);
  }

  info(): DeviceInfo {
    const e = this.entry();
    const c = e?.config;
    return {
      device_id: this.id,
      ...(c?.device_name !== undefined ? { device_name: c.device_name } : {}),
      family: "modbus",
      address: c ? modbusAddress(c) : "",
      ...(c?.rated_power_w !== undefined ? { rated_power_w: c.rated_power_w } : {}),
      ...(c?.shed_priority !== undefined ? { shed_priority: c.shed_priority } : {}),
      fully_configured: e?.fully_configured ?? false,
    };
  }

  descriptor(): DeviceDescriptor | null {
    return this.entry()?.descriptor ?? null;
  }

  /** The poller derives a Modbus device's op mode itself (dispatch tells it, not the directory). */
  setRemote(): void {}
}

class LocalEntry extends ReadDevice {
  constructor(
    private readonly dev: LocalDevice,
    s: DirectorySources,
  ) {
    super(dev.device_id, s);
  }

  info(): DeviceInfo {
    const d = this.dev;
    return {
      device_id: d.device_id,
      ...(d.device_name !== undefined ? { device_name: d.device_name } : {}),
      family: localFamily(d),
      address: d.address(),
      ...(d.rated_power_w !== undefined ? { rated_power_w: d.rated_power_w } : {}),
      ...(d.shed_priority !== undefined ? { shed_priority: d.shed_priority } : {}),
      fully_configured: true,
    };
  }

  descriptor(): DeviceDescriptor {
    return this.dev.descriptor();
  }

  setRemote(remote: boolean): void {
    this.s.local?.setRemote(this.id, remote);
  }
}

/**
 * The Modbus devices in the registry's order, then the local ones. `version` follows the
 * registry's and goes up too when a local device's descriptor changes (a Zigbee device's
 * identity arrives with the bridge's device list).
 */
export function deviceDirectory(s: DirectorySources): DeviceDirectory {
  let localSeen = "";
  let localChanges = 0;
  const local = () => s.local?.list() ?? [];
  return {
    list: () => [...s.registry.list().map((r) => new ModbusEntry(r.config.device_id, s)), ...local().map((d) => new LocalEntry(d, s))],
    get: (id) => {
      if (s.registry.get(id)) return new ModbusEntry(id, s);
      const d = s.local?.get(id);
      return d ? new LocalEntry(d, s) : undefined;
    },
    get version() {
      const now = JSON.stringify(local().map((d) => [d.device_id, d.descriptor()]));
      if (now !== localSeen) {
        localSeen = now;
        localChanges++;
      }
      return s.registry.version + localChanges;
    },
  };
}
