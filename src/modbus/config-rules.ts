// The rules a list of Modbus device entries must meet beyond their schema, the same for
// the config file's `devices` and a configure request (the family's connector): our
// organization, a known profile, a configured RTU port; and for the config file's block
// also one baud per port. One device_id per device is config/device-ids.ts's, for every
// family at once.
import type { ErrorDetail } from "../errors.js";
import { integrationName, organizationOf, type DeviceConfig } from "./config-schema.js";
import type { RtuPortConfig } from "./config-schema.js";
import { sharedBaudIssues } from "./rtu-baud.js";
import { nearest } from "../util/nearest.js";

const mean = (name: string, known: string[]) => {
  const near = nearest(name, known);
  return near ? `; did you mean "${near}"?` : "";
};

export interface DeviceRules {
  organizationId: string;
  rtuPorts: Record<string, RtuPortConfig>;
  profiles: { has(name: string): boolean; names(): string[] };
}

/** Every problem of the list, by path (`devices[i].field`). */
export function validateDevices(devices: readonly DeviceConfig[], rules: DeviceRules): ErrorDetail[] {
  const out: ErrorDetail[] = [];
  devices.forEach((d, i) => {
    const org = organizationOf(d);
    if (org !== rules.organizationId)
      out.push({ path: `devices[${i}].device_integration`, message: `organization "${org}" is not this gateway's` });
    const name = integrationName(d);
    if (!rules.profiles.has(name))
      out.push({
        path: `devices[${i}].device_integration`,
        message: `unknown integration "${name}"${mean(name, rules.profiles.names())} (known: ${rules.profiles.names().join(", ")})`,
      });
    if (d.mb_type === 1 && !(String(d.mb_rtu_no) in rules.rtuPorts)) {
      out.push({
        path: `devices[${i}].mb_rtu_no`,
        message: `RTU port ${d.mb_rtu_no} is not in rtu_ports (${Object.keys(rules.rtuPorts).join(", ") || "none configured"})`,
      });
    }
  });
  return out;
}

/**
 * Every problem of the config file's Modbus block beyond its schema (load-config.ts): the
 * rules of its device entries, a broken site profile when a device names a profile the
 * site lacks (it might have been that one), and one baud per RTU port.
 */
export function modbusBlockIssues(
  cfg: { organization_id: string; devices: readonly DeviceConfig[]; rtu_ports: Record<string, RtuPortConfig> },
  profiles: DeviceRules["profiles"] & { errors: readonly ErrorDetail[] },
): ErrorDetail[] {
  const out = validateDevices(cfg.devices, { organizationId: cfg.organization_id, rtuPorts: cfg.rtu_ports, profiles });
  const needed = cfg.devices.some((d) => !profiles.has(integrationName(d)));
  if (needed) out.push(...profiles.errors.map((e) => ({ path: e.path, message: `site profile left out: ${e.message}` })));
  out.push(...sharedBaudIssues(cfg.devices, cfg.rtu_ports));
  return out;
}
