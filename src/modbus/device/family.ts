// The Modbus family: a ProfileDevice for every device the persisted registry holds
// (dv_device), made again only when its row changes; its polling (polling.ts) reads them
// at each tick of the site clock.
import type { DeviceFamily, TickReadings } from "../../devices/family.js";
import type { DeviceSource, RegisteredDevice } from "./types.js";
import type { DriverPool } from "./pool.js";
import { ProfileDevice, type ModbusReadings } from "./profile-device.js";
import { systemClock, type Clock } from "../../util/clock.js";

export class ModbusFamily implements DeviceFamily {
  readonly family = "modbus";
  private readonly made = new Map<string, ProfileDevice>();

  constructor(
    private readonly source: DeviceSource & { readonly version: number },
    private readonly pool: Pick<DriverPool, "driverFor">,
    /** The polling's readings; one without `read` (a test's) reads nothing on the tick. */
    private readonly readings: ModbusReadings & { read?(ts: number): TickReadings },
    /** The clock a write-only action's confirm_window_ms runs on. */
    private readonly clock: Clock = systemClock,
  ) {}

  get version(): number {
    return this.source.version;
  }

  read(ts: number): TickReadings {
    return this.readings.read?.(ts) ?? [];
  }

  devices(): readonly ProfileDevice[] {
    const rows = this.source.list();
    const out = rows.map((r) => this.of(r));
    if (this.made.size > rows.length) for (const id of [...this.made.keys()]) if (!this.source.get(id)) this.made.delete(id);
    return out;
  }

  private of(r: RegisteredDevice): ProfileDevice {
    const hit = this.made.get(r.config.device_id);
    if (hit && hit.registered === r) return hit;
    const d = new ProfileDevice(r, this.pool, this.readings, this.clock);
    this.made.set(r.config.device_id, d);
    return d;
  }
}
