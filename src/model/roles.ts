// Device roles, device_op_mode, and the table between roles and device sync's type codes.
// Code asks a device for its role (what it does on the site); the `device_type` numbers
// are declared by each family (its folder's wire-types.ts registers them here when it
// loads) and read only where that wire format is written or parsed. Imports only base:
// every layer that speaks of devices (config, profiles, devices, dispatch, ui) may use it.
import { SitegateError } from "../errors.js";

export const ROLES = ["battery", "pv", "meter", "switch", "thermostat", "input", "unknown"] as const;
/** battery: a storage inverter; pv: a solar inverter; switch: a load switched on and off; thermostat: a heating setpoint; input: a contact read; unknown: the device does not tell. */
export type Role = (typeof ROLES)[number];

/** How a device is reached ("modbus", "zigbee", "gpio", a test's own): the name a family registers its wire codes under. */
export type Family = string;

/** One device_type code of device sync (DESIGN B5), as its family declares it. */
export interface WireType {
  code: number;
  role: Role;
  /** What the status page calls it. */
  label: string;
}

/** The code device sync publishes for a device not yet known (no family's). */
const UNKNOWN_TYPE: WireType & { family: Family } = { code: 0, role: "unknown", family: "", label: "device" };

/** Every family's declared codes, by code. */
const WIRE_TYPES = new Map<number, WireType & { family: Family }>([[UNKNOWN_TYPE.code, UNKNOWN_TYPE]]);

/**
 * A family declares its device_type codes once, when its module loads (its folder's
 * wire-types.ts): a code names one role of one family, so a clash is a programming error.
 */
export function declareWireTypes(family: Family, types: readonly WireType[]): void {
  for (const t of types) {
    const held = WIRE_TYPES.get(t.code);
    if (held && (held.family !== family || held.role !== t.role))
      throw new SitegateError("INTERNAL", `device_type ${t.code} is declared by ${held.family || "no family"} as ${held.role}`);
    WIRE_TYPES.set(t.code, { ...t, family });
  }
}

/** The device_type device sync publishes for a role reached through this family (0 when the family declares none). */
export function wireType(role: Role, family: Family): number {
  for (const t of WIRE_TYPES.values()) if (t.role === role && t.family === family) return t.code;
  return UNKNOWN_TYPE.code;
}

/** A role with the device_type device sync publishes for it. */
export function typed(role: Role, family: Family): { role: Role; device_type: number } {
  return { role, device_type: wireType(role, family) };
}

/** The role of a wire device_type (a descriptor stored before roles were recorded, a config entry). */
export function roleOfWire(code: number): Role {
  return WIRE_TYPES.get(code)?.role ?? "unknown";
}

/** The status page's name of a wire device_type. */
export function wireLabel(code: number | null | undefined): string {
  return (code === null || code === undefined ? undefined : WIRE_TYPES.get(code)?.label) ?? UNKNOWN_TYPE.label;
}

/** Roles whose power_w is generation (positive lowers grid import). */
export const GENERATOR_ROLES: ReadonlySet<Role> = new Set(["battery", "pv"]);

/** A device's operating mode as a profile's op-mode map names it. */
export const OP_MODE_NAMES = ["unknown", "automatic", "remote", "standby", "fault"] as const;
export type OpModeName = (typeof OP_MODE_NAMES)[number];

/** device_op_mode in words, as device sync's description gives them: what the terminal and the status page print. */
const OP_MODE_WORDS: Record<OpModeName, string> = {
  unknown: "unknown",
  automatic: "local automatic",
  remote: "remote dispatch",
  standby: "standby",
  fault: "fault",
};

/** A device_op_mode code in words ("standby"); a code outside the five: "op mode N". */
export function opModeWords(code: number): string {
  const name = OP_MODE_NAMES[code];
  return name ? OP_MODE_WORDS[name] : `op mode ${code}`;
}

/** device_op_mode of device sync: 0 unknown, 1 local automatic, 2 under remote dispatch, 3 standby, 4 fault. */
export function opModeCode(name: OpModeName): 0 | 1 | 2 | 3 | 4 {
  return OP_MODE_NAMES.indexOf(name) as 0 | 1 | 2 | 3 | 4;
}
