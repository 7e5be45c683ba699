// Pairing (spec 4.6, DESIGN B5): the one pipeline a configure entry goes down, from the
// configure request or the config file's `devices`, each step once:
//   resolve endpoint → open bus → identify → check writes → adopt or reject
// The driver pool serves the endpoint, the bus and the device's driver; the driver
// identifies the device and runs the check writes; the registry stores the result.
// Entries on different buses are paired in parallel, entries on one bus one after another.
import type { CheckWrite, DeviceConfig } from "../config-schema.js";
import type { RtuPortConfig } from "../config-schema.js";
import { errorMessage, isSitegateError } from "../../errors.js";
import type { Logger } from "../../log.js";
import { PRIORITY } from "../bus.js";
import { endpointKey, type Endpoint } from "../endpoint.js";
import type { DeviceDriver } from "./driver.js";
import type { DriverPool } from "./pool.js";
import type { DeviceRegistry } from "./registry.js";
import type { Role } from "../../model/roles.js";
import { DECLARABLE_ROLES, declaredRole, modbusTyped, modbusWireType, partnerName } from "./wire-types.js";
import type { ConfigureResult, DeviceConnector, DeviceDescriptor } from "../../devices/types.js";
import { portBaudClash, portUsers } from "../rtu-baud.js";

export interface PairingDeps {
  pool: Pick<DriverPool, "endpointFor" | "candidate" | "adopt" | "reject" | "rtuPorts">;
  registry: Pick<DeviceRegistry, "list" | "put">;
  log: Logger;
}

export class Pairing implements Pick<DeviceConnector<DeviceConfig>, "configure"> {
  constructor(private readonly deps: PairingDeps) {}

  /** Pairs every entry; the results come back in request order. */
  async configure(devices: DeviceConfig[]): Promise<ConfigureResult[]> {
    const byBus = new Map<string, Array<{ index: number; device: DeviceConfig; endpoint: Endpoint }>>();
    devices.forEach((device, index) => {
      const endpoint = this.deps.pool.endpointFor(device); // 1. resolve endpoint
      const key = endpointKey(endpoint);
      byBus.set(key, [...(byBus.get(key) ?? []), { index, device, endpoint }]);
    });
    const results: ConfigureResult[] = new Array(devices.length);
    await Promise.all(
      [...byBus.values()].map(async (entries) => {
        for (const { index, device, endpoint } of entries) results[index] = await this.pairOne(device, endpoint);
      }),
    );
    return results;
  }

  private async pairOne(config: DeviceConfig, endpoint: Endpoint): Promise<ConfigureResult> {
    const { pool, registry, log } = this.deps;
    const id = config.device_id;
    const clash = baudConflict(config, { registry, rtuPorts: pool.rtuPorts }); // 1. the endpoint's line suits the devices on it
    if (clash) return this.refused(id, clash);
    let driver: DeviceDriver;
    try {
      driver = pool.candidate(config, endpoint); // 2. open bus
    } catch (e) {
      return this.refused(id, errorMessage(e));
    }
    let found: DeviceDescriptor;
    try {
      found = await driver.pair(PRIORITY.pairing); // 3. identify
    } catch (e) {
      pool.reject(config, driver); // 5. reject: the configuration in force stays
      // An identity mismatch is an answer from another device, not a missing one.
      const how = isSitegateError(e, "DEVICE_MISMATCH") ? "is not" : "did not respond as";
      return this.refused(id, `device ${how} ${driver.profile.name}: ${errorMessage(e)}`);
    }
    const { role, note } = resolveRole(config.mb_device_type, found.role);
    const descriptor: DeviceDescriptor = { ...found, ...modbusTyped(role) };
    const writeError = await checkWrites(driver, config.mb_check_write ?? []); // 4. check writes
    pool.adopt(config, driver); // 5. adopt: stored, fully configured only when the writes stuck
    registry.put(config, descriptor, writeError === undefined);
    const noted = note ? `; ${note}` : "";
    if (writeError !== undefined) {
      log.warn({ device_id: id, err: writeError }, "check write failed; device stored, not fully configured");
      return {
        device_id: id,
        status: "error",
        code: "REGISTRY_WRITE_FAILED",
        message: `${writeError}; the configuration is stored but the device is not fully configured${noted}`,
      };
    }
    return { device_id: id, status: "accepted", message: acceptedMessage(config, descriptor) + noted };
  }

  /** Not paired: the configuration in force for this device_id, if any, stays. */
  private refused(id: string, why: string): ConfigureResult {
    this.deps.log.warn({ device_id: id, err: why }, "pairing failed");
    return { device_id: id, status: "error", code: "PAIRING_FAILED", message: why };
  }
}

/** Runs the check writes in order; the first failure's message, or undefined when all stuck. */
async function checkWrites(driver: Pick<DeviceDriver, "checkWrite">, writes: readonly CheckWrite[]): Promise<string | undefined> {
  try {
    for (const w of writes) await driver.checkWrite(w);
    return undefined;
  } catch (e) {
    return errorMessage(e);
  }
}

function acceptedMessage(config: DeviceConfig, d: DeviceDescriptor): string {
  const what = [d.identity.manufacturer, d.identity.model, d.identity.serial].filter(Boolean).join(" ");
  const writes = config.mb_check_write?.length ? `; ${config.mb_check_write.length} check write(s) verified` : "";
  return `paired${what ? ` with ${what}` : ""} (profile ${d.profile}, device_type ${d.device_type})${writes}`;
}

/**
 * The devices of one RTU port share its baud. A device asking for another baud while
 * other devices use the port is refused (reopening the port would cut them off); the
 * port's only device may change it, and the port is reopened at the new baud.
 */
export function baudConflict(
  config: DeviceConfig,
  deps: { registry: Pick<DeviceRegistry, "list">; rtuPorts: Record<string, RtuPortConfig> },
): string | null {
  const [entering] = portUsers([config]);
  if (!entering) return null;
  const clash = portBaudClash(entering, portUsers(deps.registry.list().map((d) => d.config)), deps.rtuPorts);
  if (!clash) return null;
  const ids = clash.users.map((u) => u.device_id).sort();
  const shown = ids.length > 5 ? `${ids.slice(0, 5).join(", ")} and ${ids.length - 5} more` : ids.join(", ");
  return `mb_baud ${entering.baud} differs from the ${clash.baud} baud of RTU port ${entering.port_no} (${clash.path}), which ${shown} ${ids.length === 1 ? "uses" : "use"}; the devices of one port share its baud, so nothing was changed`;
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
    return { role: named.role, note: `device_type ${modbusWireType(named.role)} from ${said}: the device does not tell its type` };
  }
  // 99 "others" agrees with anything that is not a meter or an inverter.
  const agrees = named.role === undefined ? !DECLARABLE_ROLES.has(discovered) : named.role === discovered;
  if (agrees) return { role: discovered };
  return {
    role: discovered,
    note: `${said} disagrees with the device, which reports itself as ${partnerName(discovered)}; device_type ${modbusWireType(discovered)} is used`,
  };
}
