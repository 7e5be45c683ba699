// Drivers by device_id, shared by pairing, polling and dispatch, so a device is
// discovered once. A configuration change replaces the driver once a candidate driver for
// it has paired (pairing.ts asks for the endpoint, the candidate, and adopts or rejects it).
import type { DeviceConfig } from "../config-schema.js";
import type { RtuPortConfig } from "../config-schema.js";
import type { BusManager } from "../bus.js";
import type { Endpoint } from "../endpoint.js";
import type { ProfileRegistry } from "../../profiles/registry.js";
import { DeviceDriver } from "./driver.js";
import { endpointOf, modbusSpec, specKey } from "./spec.js";

/** Where a device is: its TCP address, or its RTU port's path and framing at the device's baud. */
export function endpointForDevice(cfg: DeviceConfig, rtuPorts: Record<string, RtuPortConfig>): Endpoint {
  return endpointOf(modbusSpec(cfg), rtuPorts);
}

export class DriverPool {
  /** `cfg`: the configuration object last found to match `key` (a device asks on every health() and poll: no key is built again for it). */
  private readonly drivers = new Map<string, { key: string; driver: DeviceDriver; cfg?: DeviceConfig }>();

  constructor(
    private readonly buses: BusManager,
    private readonly profiles: ProfileRegistry,
    readonly rtuPorts: Record<string, RtuPortConfig>,
  ) {}

  /** Where the device is (throws INVALID_REQUEST for an RTU port that is not configured). */
  endpointFor(cfg: DeviceConfig): Endpoint {
    return endpointForDevice(cfg, this.rtuPorts);
  }

  /** The driver for this configuration: the cached one if the configuration is unchanged. */
  driverFor(cfg: DeviceConfig): DeviceDriver {
    const hit = this.drivers.get(cfg.device_id);
    if (hit && hit.cfg === cfg) return hit.driver;
    const spec = modbusSpec(cfg);
    const key = specKey(spec);
    if (hit && hit.key === key) {
      hit.cfg = cfg;
      return hit.driver;
    }
    const profile = this.profiles.get(spec.profile);
    const endpoint = endpointOf(spec, this.rtuPorts);
    const driver = new DeviceDriver(this.buses.get(endpoint), spec.unit, profile, endpoint);
    this.drivers.set(cfg.device_id, { key, driver, cfg });
    return driver;
  }

  /**
   * A driver to pair this configuration with, on the bus of its endpoint (opened, or
   * reframed to the device's line settings): the device's own when the configuration is
   * unchanged, else a new one that replaces it only once adopted.
   */
  candidate(cfg: DeviceConfig, endpoint: Endpoint): DeviceDriver {
    const hit = this.drivers.get(cfg.device_id);
    const spec = modbusSpec(cfg);
    if (hit && hit.key === specKey(spec)) return hit.driver;
    return new DeviceDriver(this.buses.get(endpoint), spec.unit, this.profiles.get(spec.profile), endpoint);
  }

  /** Keeps a paired candidate as the device's driver. */
  adopt(cfg: DeviceConfig, driver: DeviceDriver): void {
    this.drivers.set(cfg.device_id, { key: specKey(modbusSpec(cfg)), driver });
  }

  /**
   * After a candidate failed to pair: its bus goes back to the line settings of the
   * device's driver in force, if the candidate had changed them (another baud).
   */
  reject(cfg: DeviceConfig, candidate: DeviceDriver): void {
    const kept = this.drivers.get(cfg.device_id)?.driver;
    if (kept && kept !== candidate && kept.bus === candidate.bus) kept.bus.reframe(kept.endpoint);
  }

  forget(deviceId: string): void {
    this.drivers.delete(deviceId);
  }
}
