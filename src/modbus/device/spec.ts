// The edge between the partner's configure body and the Modbus family: a device entry's
// `mb_*` fields (mb_type 1 RTU / 2 TCP, mb_ip, mb_port, mb_rtu_no, mb_baud, mb_slave_id)
// are read here, once, into where the device is, its unit and its profile. Nothing past
// this file reads them.
import type { DeviceConfig } from "../config-schema.js";
import { integrationName } from "../config-schema.js";
import type { RtuPortConfig } from "../config-schema.js";
import { SitegateError } from "../../errors.js";
import type { Endpoint } from "../endpoint.js";

/** How a device is reached: a TCP address, or a configured RTU port (by number) at the device's baud. */
export type ModbusLink = { kind: "tcp"; host: string; port: number } | { kind: "rtu"; port_no: number; baud: number };

export interface ModbusSpec {
  device_id: string;
  link: ModbusLink;
  unit: number;
  /** The profile that speaks to it (device_integration). */
  profile: string;
}

export function modbusSpec(cfg: DeviceConfig): ModbusSpec {
  const link: ModbusLink =
    cfg.mb_type === 2 ? { kind: "tcp", host: cfg.mb_ip, port: cfg.mb_port } : { kind: "rtu", port_no: cfg.mb_rtu_no, baud: cfg.mb_baud };
  return { device_id: cfg.device_id, link, unit: cfg.mb_slave_id, profile: integrationName(cfg) };
}

/** Where the device is: its TCP address, or its RTU port's path and framing at the device's baud. */
export function endpointOf(spec: ModbusSpec, rtuPorts: Record<string, RtuPortConfig>): Endpoint {
  const l = spec.link;
  if (l.kind === "tcp") return { kind: "tcp", host: l.host, port: l.port };
  const port = rtuPorts[String(l.port_no)];
  if (!port) throw new SitegateError("INVALID_REQUEST", `RTU port ${l.port_no} is not configured (rtu_ports)`);
  return { kind: "rtu", path: port.path, baud: l.baud, parity: port.parity, stopBits: port.stop_bits };
}

/** What makes a driver: where the device is, its unit, and which profile speaks to it. */
export function specKey(spec: ModbusSpec): string {
  return JSON.stringify([spec.link, spec.unit, spec.profile]);
}

/** Where it is, for the status page. */
export function specAddress(spec: ModbusSpec): string {
  const l = spec.link;
  return l.kind === "tcp" ? `tcp://${l.host}:${l.port} unit ${spec.unit}` : `RTU port ${l.port_no} unit ${spec.unit}`;
}
