// The configure flow (spec 4.6, DESIGN B5): per device, pair through the Modbus engine,
// then run its mb_check_write writes; store the result. Devices on different buses are
// handled in parallel, devices on one bus one after another.
import type { DeviceConfig } from "../config/device-schema.js";
import type { RtuPortConfig } from "../config/schema.js";
import { errorMessage, isSitegateError } from "../errors.js";
import type { Logger } from "../log.js";
import { endpointKey } from "../modbus/endpoint.js";
import { endpointForDevice } from "./pool.js";
import type { DeviceRegistry } from "./registry.js";
import { DECLARABLE_ROLES, declaredRole, partnerName, typed, wireType, type Role } from "./roles.js";
import type { DeviceConnector } from "./types.js";

export interface ConfigureResult {
  device_id: string;
  status: "accepted" | "error";
  code?: "PAIRING_FAILED" | "REGISTRY_WRITE_FAILED";
  message: string;
}

interface Deps {
  connector: DeviceConnector;
  registry: DeviceRegistry;
  rtuPorts: Record<string, RtuPortConfig>;
  log: Logger;
}

export async function configureDevices(devices: DeviceConfig[], deps: Deps): Promise<ConfigureResult[]> {
  const byBus = new Map<string, number[]>();
  devices.forEach((d, i) => {
    const key = endpointKey(endpointForDevice(d, deps.rtuPorts));
    byBus.set(key, [...(byBus.get(key) ?? []), i]);
  });
  const results: ConfigureResult[] = new Array(devices.length);
  await Promise.all(
    [...byBus.values()].map(async (indexes) => {
      for (const i of indexes) results[i] = await configureOne(devices[i], deps);
    }),
  );
  return results;
}

/**
 * The devices of one RTU port share its baud. A device asking for another baud while
 * other devices use the port is refused (reopening the port would cut them off); the
 * port's only device may change it, and the port is reopened at the new baud.
 */
export function baudConflict(config: DeviceConfig, deps: Pick<Deps, "registry" | "rtuPorts">): string | null {
  if (config.mb_type !== 1) return null;
  const port = deps.rtuPorts[String(config.mb_rtu_no)];
  if (!port) return null;
  const others = deps.registry.list().filter((d) => {
    const c = d.config;
    return c.device_id !== config.device_id && c.mb_type === 1 && deps.rtuPorts[String(c.mb_rtu_no)]?.path === port.path;
  });
  const clash = others.filter((d) => d.config.mb_baud !== config.mb_baud);
  if (!clash.length) return null;
  const portBaud = clash[0].config.mb_baud as number;
  const users = others.map((d) => d.config.device_id).sort();
  const shown = users.length > 5 ? `${users.slice(0, 5).join(", ")} and ${users.length - 5} more` : users.join(", ");
  return `mb_baud ${config.mb_baud} differs from the ${portBaud} baud of RTU port ${config.mb_rtu_no} (${port.path}), which ${shown} ${users.length === 1 ? "uses" : "use"}; the devices of one port share its baud, so nothing was changed`;
}

/**
 * The role of a device: what discovery found, or, where discovery cannot tell (role
 * unknown, e.g. a SunSpec device with only the common model), the role the partner's
 * mb_device_type names. When the two disagree, discovery wins (it read the device) and a
 * note, in the partner's words and codes, says so.
 */
export function resolveRole(declared: number, discovered: Role): { role: Role; note?: string } {
  const named = declaredRole(declared);
  const said = `mb_device_type ${declared} (${named.name})`;
  if (discovered === "unknown") {
    if (named.role === undefined) return { role: "unknown" };
    return { role: named.role, note: `device_type ${wireType(named.role)} from ${said}: the device does not tell its type` };
  }
  // 99 "others" agrees with anything that is not a meter or an inverter.
  const agrees = named.role === undefined ? !DECLARABLE_ROLES.has(discovered) : named.role === discovered;
  if (agrees) return { role: discovered };
  return { role: discovered, note: `${said} disagrees with the device, which reports itself as ${partnerName(discovered)}; device_type ${wireType(discovered)} is used` };
}

async function configureOne(config: DeviceConfig, deps: Deps): Promise<ConfigureResult> {
  const id = config.device_id;
  const conflict = baudConflict(config, deps);
  if (conflict) {
    deps.log.warn({ device_id: id }, conflict);
    return { device_id: id, status: "error", code: "PAIRING_FAILED", message: conflict };
  }
  let descriptor;
  try {
    descriptor = await deps.connector.pair(config);
  } catch (e) {
    // The previous configuration of this device_id, if any, stays in force.
    deps.log.warn({ device_id: id, err: errorMessage(e) }, "pairing failed");
    return { device_id: id, status: "error", code: "PAIRING_FAILED", message: errorMessage(e) };
  }
  const type = resolveRole(config.mb_device_type, descriptor.role);
  descriptor = { ...descriptor, ...typed(type.role) };
  const note = type.note ? `; ${type.note}` : "";
  try {
    if (config.mb_check_write?.length) await deps.connector.checkWrites(config, config.mb_check_write);
  } catch (e) {
    if (!isSitegateError(e, "REGISTRY_WRITE_FAILED")) throw e;
    deps.registry.put(config, descriptor, false);
    deps.log.warn({ device_id: id, err: errorMessage(e) }, "check write failed; device stored, not fully configured");
    return { device_id: id, status: "error", code: "REGISTRY_WRITE_FAILED", message: `${errorMessage(e)}; the configuration is stored but the device is not fully configured${note}` };
  }
  deps.registry.put(config, descriptor, true);
  const what = [descriptor.identity.manufacturer, descriptor.identity.model, descriptor.identity.serial].filter(Boolean).join(" ");
  return { device_id: id, status: "accepted", message: `paired${what ? ` with ${what}` : ""} (profile ${descriptor.profile}, device_type ${descriptor.device_type})${config.mb_check_write?.length ? `; ${config.mb_check_write.length} check write(s) verified` : ""}${note}` };
}
