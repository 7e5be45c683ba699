// The Zigbee family's device_type codes (device sync, DESIGN B5, and the config file's
// zigbee entries), declared to the one table (model/roles.ts) when this module loads.
import { declareWireTypes, roleOfWire, typed, type Role } from "../model/roles.js";

export const ZIGBEE = "zigbee";

declareWireTypes(ZIGBEE, [
  { code: 30, role: "switch", label: "Zigbee switch" },
  { code: 31, role: "thermostat", label: "thermostat" },
]);

/** A Zigbee device's role with the device_type device sync publishes for it. */
export function zigbeeTyped(role: Role): { role: Role; device_type: number } {
  return typed(role, ZIGBEE);
}

/** The role a config entry's device_type names. */
export function zigbeeRoleOf(code: number): Role {
  return roleOfWire(code);
}
