// The one registry of the site's devices: every family's (Modbus from the persisted
// dv_device rows, Zigbee and GPIO from the config file, ...), each a `Device` with its
// latest values, health and op mode. Dispatch, the status page, device sync and the
// fleet read devices here, never through a transport.
import type { Device, DeviceDirectory, Metrics } from "../model/device.js";
import type { DeviceFamily } from "./family.js";

export class SiteDevices implements DeviceDirectory {
  private readonly families: DeviceFamily[] = [];
  private readonly reported = new Set<string>();

  /**
   * `onClash`: a device_id two families list (a site that stored one before the rule of one
   * device_id per device, config/device-ids.ts): told once per id; the first family keeps it,
   * so device sync, dispatch and the ledger see one device under that id.
   */
  constructor(
    families: readonly DeviceFamily[] = [],
    private readonly onClash?: (deviceId: string, families: string[]) => void,
  ) {
    for (const f of families) this.add(f);
  }

  /** A family joins (the composition root adds each from its factory list); a device_id belongs to the first family that lists it. */
  add(f: DeviceFamily): void {
    this.families.push(f);
  }

  list(): readonly Device[] {
    const all = this.families.flatMap((f) => f.devices());
    const seen = new Map<string, Device>();
    const out: Device[] = [];
    for (const d of all) {
      const first = seen.get(d.id);
      if (!first) {
        seen.set(d.id, d);
        out.push(d);
      } else if (!this.reported.has(d.id)) {
        this.reported.add(d.id);
        this.onClash?.(d.id, [first.info().family, d.info().family]);
      }
    }
    return out;
  }

  get(deviceId: string): Device | undefined {
    for (const f of this.families) {
      const d = f.devices().find((x) => x.id === deviceId);
      if (d) return d;
    }
    return undefined;
  }

  get version(): number {
    return this.families.reduce((s, f) => s + (f.version ?? 0), 0);
  }

  /** The devices of the families that report on their own (not polled); an id an earlier family holds stays that family's. */
  reporting(): readonly Device[] {
    const listed = new Set(this.list());
    return this.families.filter((f) => !f.polled).flatMap((f) => f.devices().filter((d) => listed.has(d)));
  }

  /** The latest readings of every online device that reports on its own: one site tick's share of the snapshot. */
  readings(): Array<{ device_id: string; metrics: Metrics }> {
    const out: Array<{ device_id: string; metrics: Metrics }> = [];
    for (const d of this.reporting()) {
      const m = d.latest();
      if (d.health().online && Object.keys(m).length > 0) out.push({ device_id: d.id, metrics: { ...m } });
    }
    return out;
  }
}
