// Device roles and the one table between roles and the wire's type codes. Code asks a
// device for its role (what it does on the site); the numbers of device sync's
// `device_type`, the configure request's `mb_device_type` and device_op_mode are written
// here and read only where those wire formats are written or parsed. No imports: every
// layer that speaks of devices (config, profiles, devices, dispatch, ui) may use it.

export const ROLES = ["battery", "pv", "meter", "switch", "thermostat", "input", "unknown"] as const;
/** battery: a storage inverter; pv: a solar inverter; switch: a load switched on and off; thermostat: a heating setpoint; input: a contact read; unknown: the device does not tell. */
export type Role = (typeof ROLES)[number];

/** How a device is reached: the wire code of a switch depends on it. */
export type Family = "modbus" | "zigbee" | "gpio";

interface WireType {
  code: number;
  role: Role;
  family: Family;
  /** What the status page calls it. */
  label: string;
  /** What the partner's vocabulary calls it (configure notes). */
  partner?: string;
}

/** A role no family lists: the code device sync publishes for a device not yet known. */
const UNKNOWN_TYPE: WireType = { code: 0, role: "unknown", family: "modbus", label: "device" };

/** device_type codes of device sync (DESIGN B5) and of the config file's zigbee and gpio entries. */
const WIRE_TYPES: readonly WireType[] = [
  UNKNOWN_TYPE,
  { code: 10, role: "battery", family: "modbus", label: "battery inverter", partner: "storage inverter" },
  { code: 11, role: "pv", family: "modbus", label: "PV inverter", partner: "solar inverter" },
  { code: 12, role: "meter", family: "modbus", label: "meter", partner: "meter" },
  { code: 14, role: "switch", family: "modbus", label: "switch", partner: "on/off switch" },
  { code: 30, role: "switch", family: "zigbee", label: "Zigbee switch" },
  { code: 31, role: "thermostat", family: "zigbee", label: "thermostat" },
  { code: 40, role: "input", family: "gpio", label: "GPIO input" },
  { code: 41, role: "switch", family: "gpio", label: "GPIO output" },
];

/** The device_type device sync publishes for a role reached through this family. */
export function wireType(role: Role, family: Family = "modbus"): number {
  return (
    WIRE_TYPES.find((t) => t.role === role && t.family === family) ??
    WIRE_TYPES.find((t) => t.role === role && t.family === "modbus") ??
    UNKNOWN_TYPE
  ).code;
}

/** A role with the device_type device sync publishes for it. */
export function typed(role: Role, family: Family = "modbus"): { role: Role; device_type: number } {
  return { role, device_type: wireType(role, family) };
}

/** The role of a wire device_type (a descriptor stored before roles were recorded, a config entry). */
export function roleOfWire(code: number): Role {
  return WIRE_TYPES.find((t) => t.code === code)?.role ?? "unknown";
}

/** The status page's name of a wire device_type. */
export function wireLabel(code: number | null | undefined): string {
  return WIRE_TYPES.find((t) => t.code === code)?.label ?? "device";
}

/** The partner's name of a role (e.g. "storage inverter"), or the type code when it has none. */
export function partnerName(role: Role): string {
  return WIRE_TYPES.find((t) => t.role === role && t.family === "modbus")?.partner ?? `type ${wireType(role)}`;
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

/** Roles whose power_w is generation (positive lowers grid import). */
export const GENERATOR_ROLES: ReadonlySet<Role> = new Set(["battery", "pv"]);

/** A device's operating mode as a profile's op-mode map names it. */
export const OP_MODE_NAMES = ["unknown", "automatic", "remote", "standby", "fault"] as const;
export type OpModeName = (typeof OP_MODE_NAMES)[number];

/** device_op_mode of device sync: 0 unknown, 1 local automatic, 2 under remote dispatch, 3 standby, 4 fault. */
export function opModeCode(name: OpModeName): 0 | 1 | 2 | 3 | 4 {
  return OP_MODE_NAMES.indexOf(name) as 0 | 1 | 2 | 3 | 4;
}
