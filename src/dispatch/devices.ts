// Dispatch's one place between its claims and the device model: a claim's action written
// through the capability that carries it (driveOf, the model's one table of them), and the
// device as one plan sees it. Nothing here knows a transport; a device offers a
// capability or it does not.
import { SitegateError } from "../errors.js";
import { driveOf, type Device, type DeviceDirectory, type Metrics, type PreState } from "../model/device.js";
import type { ActionName } from "../model/vocabulary.js";
import type { Planned } from "./allocate.js";
import type { MeterCandidate } from "../devices/grid-meter.js";

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

/** Every device with a descriptor, fully configured or not, as one plan sees it. */
export function planned(dir: Pick<DeviceDirectory, "list">): Planned[] {
  const out: Planned[] = [];
  for (const device of dir.list()) {
    const descriptor = device.descriptor();
    if (!descriptor) continue;
    const on = device.switch?.outputsOn?.();
    out.push({
      device,
      descriptor,
      online: device.health().online,
      metrics: { ...device.latest() },
      ...(on !== undefined ? { outputsOn: on } : {}),
    });
  }
  return out;
}

/** What the grid meter rule (devices/grid-meter.ts) needs to know of a planned device. */
export function meterView(d: Planned): MeterCandidate {
  return {
    device_id: d.device.id,
    role: d.descriptor.role,
    fully_configured: d.device.info().fully_configured,
    online: d.online,
    power_w: d.metrics.power_w,
  };
}
