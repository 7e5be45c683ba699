// The device operations both front ends offer (HTTPS routes in api/, MQTT commands in
// fleet/): the configure request, parsed and cross-checked through the pairing family's
// connector (the same rules as the config file's), and the device sync view. No HTTP in here: failures are SitegateErrors,
// which services/errors.ts gives a status.
import type { Config } from "../config/schema.js";
import { issuesToDetails } from "../util/zod-issues.js";
import { configDeclaredDevices, deviceIdClashes, newDeviceIdProblems, type DeclaredDevice } from "../config/device-ids.js";
import type { DeviceConnector } from "../devices/types.js";
import { capabilitiesOf, type Device, type DeviceDescriptor, type DeviceDirectory, type DeviceHealth } from "../model/device.js";
import type { Role } from "../model/roles.js";
import { SitegateError } from "../errors.js";
import type { Logger } from "../log.js";
import { configureBody } from "./schemas.js";
import { byCodeUnit } from "../util/compare.js";

export interface ConfigureDeps {
  config: Config;
  connector: DeviceConnector;
  /** Every device of the site, whatever its family: a new device may not take the id of another family's. */
  devices: Pick<DeviceDirectory, "list">;
  log: Logger;
}

export interface ConfigureAnswer {
  devices: Array<{ device_id: string; status: "accepted" | "error"; code?: string; message: string }>;
}

/** Validates a configure body (spec 2.7) as a whole, then pairs and check-writes each device. */
export async function configureService(body: unknown, deps: ConfigureDeps): Promise<ConfigureAnswer> {
  const parsed = configureBody(deps.connector).safeParse(body);
  if (!parsed.success)
    throw new SitegateError("INVALID_REQUEST", "the request body is invalid; nothing was changed", {
      details: issuesToDetails(parsed.error.issues),
    });
  const cross = deps.connector.check(parsed.data.devices);
  cross.push(...deviceIdRules(parsed.data.devices, deps));
  if (cross.length) throw new SitegateError("INVALID_REQUEST", "the request body is invalid; nothing was changed", { details: cross });
  const results = await deps.connector.configure(parsed.data.devices);
  return {
    devices: results.map((r) => ({ device_id: r.device_id, status: r.status, ...(r.code ? { code: r.code } : {}), message: r.message })),
  };
}

/**
 * One device_id, one device (config/device-ids.ts): the devices entering are the
 * connector's family's; those held are the site's devices of every family and the config file's. An id
 * the site already has is that device again: kept even outside the charset of new ids.
 */
function deviceIdRules(entering: ReadonlyArray<{ device_id: string }>, deps: ConfigureDeps) {
  const held: DeclaredDevice[] = [
    ...configDeclaredDevices(deps.config).map((d) => ({ ...d, where: `the config file's ${d.where}` })),
    ...deps.devices.list().map((d) => ({ device_id: d.id, family: d.info().family, where: `the ${d.info().family} device` })),
  ];
  const family = deps.connector.family;
  const incoming = entering.map((d, i) => ({ device_id: d.device_id, family, where: `devices[${i}]` }));
  const kept = new Set(held.map((d) => d.device_id));
  for (const d of incoming)
    if (kept.has(d.device_id) && newDeviceIdProblems([d]).length)
      deps.log.warn({ device_id: d.device_id }, "device_id kept: a new device could not take it (A-Z a-z 0-9 . _ -, at most 64)");
  return [...deviceIdClashes(held, incoming), ...newDeviceIdProblems(incoming, kept)];
}

/** device_op_mode is published for inverters; device_max_power for inverters and loads that have one. */
const INVERTER_ROLES: ReadonlySet<Role> = new Set(["battery", "pv"]);
const FAULT = 4;

/** A device as device sync lists it: the device, and what pairing (or its family) says it is. */
export interface SyncedDevice {
  device: Device;
  descriptor: DeviceDescriptor;
}

/** The devices device sync lists: every fully configured device with a descriptor, whatever its family. */
export function syncedDevices(directory: Pick<DeviceDirectory, "list">): SyncedDevice[] {
  const out: SyncedDevice[] = [];
  for (const device of directory.list()) {
    const descriptor = device.descriptor();
    if (device.info().fully_configured && descriptor) out.push({ device, descriptor });
  }
  return out;
}

/**
 * Known to be unreachable: polled (or reported on by its transport) and not answering, its
 * Zigbee bridge or broker gone, its GPIO line unavailable. A device not polled yet is not.
 */
function unreachable(device: Device): boolean {
  return isUnreachable(device.health());
}

function isUnreachable(h: DeviceHealth): boolean {
  // A Modbus device is listed from its configuration on, offline until its first poll: only
  // a failure (or an earlier answer) makes "offline" mean unreachable.
  return !h.online && (h.consecutive_failures > 0 || h.last_error !== null || h.last_ok_at !== null);
}

/**
 * What of the device sync answer follows the devices' state (op mode, reachability, the
 * maximum power, which a battery's live limits lower): a cache of the answer is good while
 * this is the same. One health() per device: the route asks on every request.
 */
export function syncState(listed: SyncedDevice[]): string {
  let s = "";
  for (const d of listed) {
    const h = d.device.health();
    const max = maxPower(d);
    s += `${s ? "," : ""}${h.op_mode}${isUnreachable(h) ? "u" : ""}${max === undefined ? "" : `@${max}`}`;
  }
  return s;
}

/** The profile's or nameplate's maximum power, else the rated load the config gives it (a relay: the sum of its coils' loads). */
function maxPower(d: SyncedDevice): number | undefined {
  if (d.descriptor.max_power_w !== undefined) return d.descriptor.max_power_w;
  const r = d.device.info().rated_power_w;
  const sum = r === undefined ? 0 : typeof r === "number" ? r : r.reduce((a, b) => a + b, 0);
  return sum > 0 ? sum : undefined;
}

/**
 * The device sync answer (spec 2.2, DESIGN B5) for the fully configured devices, each
 * with the capabilities its interfaces give it (capabilitiesOf). An
 * unreachable device stays listed, with `telemetry` as its only capability (and
 * device_op_mode 4 for an inverter), so that a partner does not plan on it.
 */
export function deviceSyncView(siteId: string, listed: SyncedDevice[]) {
  const devices = [...listed]
    .sort((a, b) => byCodeUnit(a.device.id, b.device.id))
    .map((d) => {
      const desc = d.descriptor;
      const inverter = INVERTER_ROLES.has(desc.role);
      const down = unreachable(d.device);
      const max = maxPower(d);
      const name = d.device.info().device_name;
      return {
        device_id: d.device.id,
        device_type: desc.device_type,
        ...(max !== undefined ? { device_max_power: Math.round(max) } : {}),
        ...(inverter ? { device_op_mode: down ? FAULT : d.device.health().op_mode } : {}),
        ...(name ? { name } : {}),
        capabilities: down ? ["telemetry"] : capabilitiesOf(d.device),
      };
    });
  return { site_id: siteId, devices };
}
