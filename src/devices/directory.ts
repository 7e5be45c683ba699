// The one registry of the site's devices: every family's (Modbus from the persisted
// dv_device rows, Zigbee and GPIO from the config file, ...), each a `Device` with its
// latest values, health and op mode. Dispatch, the status page, device sync and the
// fleet read devices here, never through a transport.
import type { Device, DeviceDirectory } from "../model/device.js";
import { z } from "zod";
import type { DeviceConnector } from "./types.js";
import { latestReadings, type DeviceFamily, type Reading, type TickReadings } from "./family.js";

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
    this.listed = null;
  }

  /** The last list() and the version it was built at (a family's list changes only with its version). */
  private listed: { version: number; devices: readonly Device[] } | null = null;

  list(): readonly Device[] {
    const version = this.version;
    if (this.listed?.version === version) return this.listed.devices;
    const devices = this.build();
    this.listed = { version, devices };
    return devices;
  }

  private build(): readonly Device[] {
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

  /** What pairs the partner's configure entries: the first family that has a connector (Modbus); none: every entry is refused. */
  connector(): DeviceConnector {
    const own = this.families.find((f) => f.connector)?.connector;
    if (own) return own;
    return {
      family: "none",
      entrySchema: z.object({ device_id: z.string() }),
      check: () => [],
      configure: async (devices) =>
        devices.map((d) => ({
          device_id: d.device_id,
          status: "error",
          code: "PAIRING_FAILED",
          message: "no device family of this site pairs configure entries",
        })),
    };
  }

  get version(): number {
    return this.families.reduce((s, f) => s + (f.version ?? 0), 0);
  }

  /**
   * One tick's readings of every family: what each reads on the tick, or, for a family that
   * reports on its own, its devices' latest values. A reading of an id an earlier family
   * holds is left out (the device under that id is the earlier family's).
   */
  read(ts: number): TickReadings {
    const owner = new Map(this.list().map((d) => [d.id, d]));
    const out: Array<TickReadings[number]> = [];
    for (const f of this.families) {
      const mine = f.devices().filter((d) => owner.get(d.id) === d);
      if (!f.read) {
        out.push({ source: f.family, readings: latestReadings(mine) });
        continue;
      }
      const ids = new Set(mine.map((d) => d.id));
      const own = (rs: readonly Reading[]) => rs.filter((r) => ids.has(r.device_id));
      for (const part of f.read(ts))
        out.push({ source: part.source, readings: part.readings instanceof Promise ? part.readings.then(own) : own(part.readings) });
    }
    return out;
  }
}
