// The configure flow (spec 4.6, DESIGN B5): per device, pair through the Modbus engine,
// then run its mb_check_write writes; store the result. Devices on different buses are
// handled in parallel, devices on one bus one after another.
import type { DeviceConfig } from "../config/device-schema.js";
import { errorMessage, isSitegateError } from "../errors.js";
import type { Logger } from "../log.js";
import { endpointKey } from "../modbus/endpoint.js";
import { endpointForDevice } from "./pool.js";
import type { DeviceRegistry } from "./registry.js";
import type { DeviceConnector } from "./types.js";

export interface ConfigureResult {
  device_id: string;
  status: "accepted" | "error";
  code?: "PAIRING_FAILED" | "REGISTRY_WRITE_FAILED";
  message: string;
}

export async function configureDevices(
  devices: DeviceConfig[],
  deps: { connector: DeviceConnector; registry: DeviceRegistry; rtuPorts: Record<string, string>; log: Logger },
): Promise<ConfigureResult[]> {
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

async function configureOne(
  config: DeviceConfig,
  deps: { connector: DeviceConnector; registry: DeviceRegistry; log: Logger },
): Promise<ConfigureResult> {
  const id = config.device_id;
  let descriptor;
  try {
    descriptor = await deps.connector.pair(config);
  } catch (e) {
    // The previous configuration of this device_id, if any, stays in force.
    deps.log.warn({ device_id: id, err: errorMessage(e) }, "pairing failed");
    return { device_id: id, status: "error", code: "PAIRING_FAILED", message: errorMessage(e) };
  }
  try {
    if (config.mb_check_write?.length) await deps.connector.checkWrites(config, config.mb_check_write);
  } catch (e) {
    if (!isSitegateError(e, "REGISTRY_WRITE_FAILED")) throw e;
    deps.registry.put(config, descriptor, false);
    deps.log.warn({ device_id: id, err: errorMessage(e) }, "check write failed; device stored, not fully configured");
    return { device_id: id, status: "error", code: "REGISTRY_WRITE_FAILED", message: `${errorMessage(e)}; the configuration is stored but the device is not fully configured` };
  }
  deps.registry.put(config, descriptor, true);
  const what = [descriptor.identity.manufacturer, descriptor.identity.model, descriptor.identity.serial].filter(Boolean).join(" ");
  return { device_id: id, status: "accepted", message: `paired${what ? ` with ${what}` : ""} (profile ${descriptor.profile}, device_type ${descriptor.device_type})${config.mb_check_write?.length ? `; ${config.mb_check_write.length} check write(s) verified` : ""}` };
}
