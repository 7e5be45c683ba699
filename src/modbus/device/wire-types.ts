// The Modbus family's wire codes: the device_type codes device sync publishes for its
// devices (DESIGN B5), declared to the one table (model/roles.ts) when this module loads,
// and the configure request's mb_device_type with the partner's names of the roles.
import { declareWireTypes, typed, wireType, type Role } from "../../model/roles.js";

export const MODBUS = "modbus";

/** device_type codes, with the partner's name of each role (configure notes). */
const CODES: ReadonlyArray<{ code: number; role: Role; label: string; partner: string }> = [
  { code: 10, role: "battery", label: "battery inverter", partner: "storage inverter" },
  { code: 11, role: "pv", label: "PV inverter", partner: "solar inverter" },
  { code: 12, role: "meter", label: "meter", partner: "meter" },
  { code: 14, role: "switch", label: "switch", partner: "on/off switch" },
];
declareWireTypes(MODBUS, CODES);

/** A Modbus device's role with the device_type device sync publishes for it. */
export function modbusTyped(role: Role): { role: Role; device_type: number } {
  return typed(role, MODBUS);
}

/** The device_type of a Modbus device of this role (0: a role the family has no code for). */
export function modbusWireType(role: Role): number {
  return wireType(role, MODBUS);
}

/** The partner's name of a role (e.g. "storage inverter"), or the type code when it has none. */
export function partnerName(role: Role): string {
  return CODES.find((t) => t.role === role)?.partner ?? `type ${modbusWireType(role)}`;
}

/** The configure request's mb_device_type: 1 meter, 2 solar inverter, 3 storage inverter, 99 others (no one role). */
const MB_DEVICE_TYPES: Readonly<Record<number, { role?: Role; name: string }>> = {
  1: { role: "meter", name: "meter" },
  2: { role: "pv", name: "solar inverter" },
  3: { role: "battery", name: "storage inverter" },
  99: { name: "others" },
};

/** What a partner's mb_device_type says: the role it names (none for "others") and its name. */
export function declaredRole(mbDeviceType: number): { role?: Role; name: string } {
  return MB_DEVICE_TYPES[mbDeviceType] ?? { name: "unknown" };
}

/** The roles an mb_device_type can name: "others" agrees with any role but these. */
export const DECLARABLE_ROLES: ReadonlySet<Role> = new Set(Object.values(MB_DEVICE_TYPES).flatMap((t) => (t.role ? [t.role] : [])));
