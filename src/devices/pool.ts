// Drivers by device_id, shared by pairing, polling and dispatch, so a device is
// discovered once. A configuration change replaces the driver once a candidate driver for
// it has paired (pairing.ts asks for the endpoint, the candidate, and adopts or rejects it).
import type { DeviceConfig } from "../config/device-schema.js";
import type { RtuPortConfig } from "../config/schema.js";
import { integrationName } from "../config/device-schema.js";
import { SitegateError } from "../errors.js";
import type { BusManager } from "../modbus/bus.js";
import type { Endpoint } from "../modbus/endpoint.js";
import type { ProfileRegistry } from "../profiles/registry.js";
import { DeviceDriver } from "./driver.js";

/** Where a device is: its TCP address, or its RTU port's path and framing at the device's baud. */
export function endpointForDevice(cfg: DeviceConfig, rtuPorts: Record<string, RtuPortConfig>): Endpoint {
  if (cfg.mb_type === 2) return { kind: "tcp", host: cfg.mb_ip, port: cfg.mb_port };
  const port = rtuPorts[String(cfg.mb_rtu_no)];
  if (!port) throw new SitegateError("INVALID_REQUEST", `RTU port ${cfg.mb_rtu_no} is not configured (rtu_ports)`);
  return { kind: "rtu", path: port.path, baud: cfg.mb_baud, parity: port.parity, stopBits: port.stop_bits };
}

/** What makes a driver: where the device is and which profile speaks to it. */
function driverKey(cfg: DeviceConfig): string {
  return JSON.stringify([cfg.mb_type, cfg.mb_ip, cfg.mb_port, cfg.mb_rtu_no, cfg.mb_baud, cfg.mb_slave_id, cfg.device_integration]);
}

export function unitOf(cfg: DeviceConfig): number {
  return cfg.mb_slave_id;
}

export class DriverPool {
  private readonly drivers = new Map<string, { key: string; driver: DeviceDriver }>();

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
    const key = driverKey(cfg);
    const hit = this.drivers.get(cfg.device_id);
    if (hit && hit.key === key) return hit.driver;
    const profile = this.profiles.get(integrationName(cfg));
    const endpoint = this.endpointFor(cfg);
    const driver = new DeviceDriver(this.buses.get(endpoint), unitOf(cfg), profile, endpoint);
    this.drivers.set(cfg.device_id, { key, driver });
    return driver;
  }

  /**
   * A driver to pair this configuration with, on the bus of its endpoint (opened, or
   * reframed to the device's line settings): the device's own when the configuration is
   * unchanged, else a new one that replaces it only once adopted.
   */
  candidate(cfg: DeviceConfig, endpoint: Endpoint): DeviceDriver {
    const hit = this.drivers.get(cfg.device_id);
    if (hit && hit.key === driverKey(cfg)) return hit.driver;
    const profile = this.profiles.get(integrationName(cfg));
    return new DeviceDriver(this.buses.get(endpoint), unitOf(cfg), profile, endpoint);
  }

  /** Keeps a paired candidate as the device's driver. */
  adopt(cfg: DeviceConfig, driver: DeviceDriver): void {
    this.drivers.set(cfg.device_id, { key: driverKey(cfg), driver });
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
