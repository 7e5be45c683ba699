// Dispatch's one place between its claims and the device model: a claim's action written
// through the capability that carries it (driveOf, the model's one table of them), and the
// device as the planner sees it. Nothing here knows a transport; a device offers a
// capability or it does not.
import { SitegateError } from "../errors.js";
import { driveOf, type Device, type DeviceDirectory, type Metrics, type PreState } from "../model/device.js";
import type { ActionName } from "../model/vocabulary.js";
import type { DispatchDevice } from "./allocate.js";

/** What one claim (or the claims stacked on a device) writes: the action, and its power or percent. */
export interface Setting {
  action: ActionName;
  watts?: number;
  pct?: number;
}

/**
 * The claim written through the capability interface that carries its action
 * (model/device.ts): charge/discharge set a power, a curtailment a limit, a shed switches
 * a load off or sets a heating setpoint back from the pre-event state the ledger holds (`pre`).
 */
export async function apply(d: Device, s: Setting, pre: PreState): Promise<void> {
  const drive = driveOf(d, s.action);
  if (!drive) throw new SitegateError("DEVICE_NOT_FOUND", `device ${d.id} has no ${s.action} action`);
  return drive.write(s, pre);
}

/** ms between rewrites of the capability an action drives (0: the device holds it). */
export function refreshOf(d: Device | undefined, action: ActionName | undefined): number {
  return (d && action && driveOf(d, action)?.refreshMs) || 0;
}

/** The device's reading right after a write ({} when it has none to take). */
export async function confirmRead(d: Device): Promise<Metrics> {
  return (await d.confirm?.()) ?? {};
}

/** Every device with a descriptor, fully configured or not, as the planner sees it. */
export function dispatchDevices(dir: Pick<DeviceDirectory, "list">): DispatchDevice[] {
  const out: DispatchDevice[] = [];
  for (const d of dir.list()) {
    const desc = d.descriptor();
    if (!desc) continue;
    const info = d.info();
    const coils = d.switch?.outputsOn?.();
    const power = d.power;
    out.push({
      device_id: d.id,
      role: desc.role,
      device: d,
      ...(desc.max_power_w !== undefined ? { max_power_w: desc.max_power_w } : {}),
      fully_configured: info.fully_configured,
      online: d.health().online,
      metrics: { ...d.latest() },
      ...(coils !== undefined ? { coils_on: coils } : {}),
      ...(info.rated_power_w !== undefined ? { rated_power_w: info.rated_power_w } : {}),
      ...(info.shed_priority !== undefined ? { shed_priority: info.shed_priority } : {}),
      ...(power?.showsForced ? { showsForced: (dir, m) => power.showsForced?.(dir, m) } : {}),
    });
  }
  return out;
}
