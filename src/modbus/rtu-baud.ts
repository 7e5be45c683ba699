// The one rule of RTU ports, written once for the config file (config-rules.ts) and for a
// configure request (modbus/device/pairing.ts): the devices of one port share its baud,
// the baud of the port's first device (another would need the port reopened, cutting the
// others off). Each caller words the refusal in its own terms.
import type { ErrorDetail } from "../errors.js";
import type { DeviceConfig } from "./config-schema.js";
import type { RtuPortConfig } from "./config-schema.js";

/** An RTU device entry, as the rule sees it; `index`: its place in the caller's list. */
export interface PortUser {
  device_id: string;
  port_no: number;
  baud: number;
  index: number;
}

/** The RTU entries of a device list (TCP entries have no port), with their index in it. */
export function portUsers(devices: readonly DeviceConfig[]): PortUser[] {
  return devices.flatMap((d, index) => (d.mb_type === 1 ? [{ device_id: d.device_id, port_no: d.mb_rtu_no, baud: d.mb_baud, index }] : []));
}

/**
 * Whether `entering` may use its port beside `users` (other devices, in order; its own
 * earlier entry is not one): undefined, or the port (its path), the port's baud (its
 * first user's) and every user of the port. A port not configured is not this rule's.
 */
export function portBaudClash(
  entering: PortUser,
  users: readonly PortUser[],
  rtuPorts: Readonly<Record<string, RtuPortConfig>>,
): { path: string; baud: number; first: PortUser; users: PortUser[] } | undefined {
  const port = rtuPorts[String(entering.port_no)];
  if (!port) return undefined;
  const on = users.filter((u) => u.device_id !== entering.device_id && rtuPorts[String(u.port_no)]?.path === port.path);
  const first = on[0];
  if (first === undefined || first.baud === entering.baud) return undefined;
  return { path: port.path, baud: first.baud, first, users: on };
}

/** The config file's `devices` against the rule: the first device on a port sets its baud. */
export function sharedBaudIssues(devices: readonly DeviceConfig[], rtuPorts: Readonly<Record<string, RtuPortConfig>>): ErrorDetail[] {
  const users = portUsers(devices);
  return users.flatMap((u, k) => {
    const clash = portBaudClash(u, users.slice(0, k), rtuPorts);
    if (!clash) return [];
    const message = `${u.baud} differs from ${clash.baud} of devices[${clash.first.index}] on the same RTU port (${clash.path}); the devices of one port share its baud`;
    return [{ path: `devices[${u.index}].mb_baud`, message }];
  });
}
