// The site clock over one Modbus family, as the daemon wires them (parts/families.ts,
// daemon.ts): the family's polling reads the devices of `source` at each tick.
import type { DeviceSource } from "../../src/modbus/device/types.js";
import { SiteDevices } from "../../src/devices/directory.js";
import { ModbusFamily } from "../../src/modbus/device/family.js";
import { ModbusPolling } from "../../src/modbus/device/polling.js";
import type { DriverPool } from "../../src/modbus/device/pool.js";
import { SiteClock, type SiteClockOptions } from "../../src/telemetry/site-clock.js";
import type { SnapshotSink } from "../../src/telemetry/types.js";

/** A source without a version never changes its list. */
export function modbusSiteClock(
  source: DeviceSource & { readonly version?: number },
  sink: SnapshotSink,
  pool: Pick<DriverPool, "driverFor">,
  opts: SiteClockOptions,
): SiteClock & { polling: ModbusPolling } {
  const versioned = {
    list: () => source.list(),
    get: (id: string) => source.get(id),
    get version() {
      return source.version ?? 0;
    },
  };
  const polling = new ModbusPolling(versioned, pool, { intervalMs: opts.intervalMs, log: opts.log });
  const devices = new SiteDevices([new ModbusFamily(versioned, pool, polling)]);
  return Object.assign(new SiteClock(devices, sink, opts), { polling });
}
