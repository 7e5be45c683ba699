// The dispatcher's view of the device layer: registered devices with their capabilities,
// health and latest metrics, and the profile's control actions written through the
// device's bus in the control lane (ahead of polling). A new device model needs a
// profile file, not code here.
import { SitegateError } from "../errors.js";
import { PRIORITY } from "../modbus/bus.js";
import type { DriverPool } from "../devices/pool.js";
import type { DeviceDriver } from "../devices/driver.js";
import type { DeviceSource, HealthView } from "../devices/types.js";
import type { DeviceConfig } from "../config/device-schema.js";
import type { ActionName } from "../profiles/schema.js";
import type { DispatchDevice } from "./allocate.js";
import type { ActionParams, DeviceControl, RawWrite } from "./control.js";
import { planControlWrites } from "./control-values.js";

export interface TelemetryView extends HealthView {
  latest(deviceId: string): Record<string, number> | undefined;
  /** A reading taken outside the poll: the latest values take it at once. */
  confirm(deviceId: string, metrics: Record<string, number>): void;
  setRemote(deviceId: string, remote: boolean): void;
}

/** What a confirmation read after a setpoint write reads: the device's AC power. */
const CONFIRM_METRICS = ["power_w"] as const;

export class ModbusDeviceControl implements DeviceControl {
  constructor(
    private readonly source: DeviceSource,
    private readonly telemetry: TelemetryView,
    private readonly pool: Pick<DriverPool, "driverFor">,
  ) {}

  devices(): DispatchDevice[] {
    const out: DispatchDevice[] = [];
    for (const d of this.source.list()) {
      if (!d.descriptor) continue;
      const h = this.telemetry.health(d.config.device_id);
      const metrics = this.telemetry.latest(d.config.device_id) ?? {};
      out.push({
        device_id: d.config.device_id,
        role: d.descriptor.role,
        capabilities: d.descriptor.capabilities,
        max_power_w: d.descriptor.max_power_w ?? (d.descriptor.role === "battery" ? nameplate(d.config) : undefined),
        fully_configured: d.fully_configured,
        online: h?.online ?? false,
        metrics,
        coils_on: this.coilsOn(d.config, metrics),
        rated_power_w: d.config.rated_power_w,
        shed_priority: d.config.shed_priority,
      });
    }
    return out;
  }

  private coilsOn(config: DeviceConfig, metrics: Record<string, number>): number | undefined {
    try {
      return this.pool.driverFor(config).coilsOn(metrics);
    } catch {
      return undefined; // no driver (its profile or port is gone): nothing to switch either
    }
  }

  private driver(deviceId: string): DeviceDriver {
    const d = this.source.get(deviceId);
    if (!d) throw new SitegateError("DEVICE_NOT_FOUND", `device ${deviceId} is not configured`);
    return this.pool.driverFor(d.config);
  }

  hasAction(deviceId: string, action: ActionName): boolean {
    try {
      return (this.driver(deviceId).profile.actions[action]?.length ?? 0) > 0;
    } catch {
      return false;
    }
  }

  refreshMs(deviceId: string): number {
    try {
      return this.driver(deviceId).profile.refresh_s * 1000;
    } catch {
      return 0;
    }
  }

  /** The action's writes for this device, resolved (pairs the device first if it has not answered yet). */
  async plan(deviceId: string, action: ActionName, params: ActionParams): Promise<RawWrite[]> {
    const driver = this.driver(deviceId);
    const steps = driver.profile.actions[action];
    if (!steps?.length) throw new SitegateError("DEVICE_NOT_FOUND", `profile ${driver.profile.name} has no ${action} action`);
    if (!driver.paired) await driver.pair(PRIORITY.control);
    const writes = await planControlWrites(driver, steps, params);
    if (writes.length === 0)
      throw new SitegateError("DEVICE_NOT_FOUND", `device ${deviceId} has none of the registers of its ${action} action`);
    return writes;
  }

  /** Raw reads in the control lane (the ledger's pre-event state and read-back). */
  async read(deviceId: string, table: "holding" | "coil", address: number, count: number, unit?: number): Promise<number[]> {
    const driver = this.driver(deviceId);
    const opts = { priority: PRIORITY.control, timeoutMs: driver.timeoutMs, retries: 1 };
    return driver.bus.read(unit ?? driver.unit, table, address, count, opts);
  }

  /** The profile's read-back of the action: the device holds the mode it was told. */
  async readBack(deviceId: string, action: ActionName): Promise<void> {
    await this.driver(deviceId).readBack(action);
  }

  /** Raw writes in the control lane, in order (planWrites merges neighbouring coils). */
  async write(deviceId: string, writes: readonly RawWrite[]): Promise<void> {
    const driver = this.driver(deviceId);
    const opts = { priority: PRIORITY.control, timeoutMs: driver.timeoutMs };
    for (const w of writes) {
      const unit = w.unit ?? driver.unit;
      if (w.table === "coil") await driver.bus.writeCoils(unit, w.address, w.coils, opts);
      else await driver.bus.writeRegisters(unit, w.address, w.words, { ...opts, fn: w.words.length === 1 ? 6 : 16 });
    }
  }

  /** The power point (and its scale factor) in the control lane, no retry: bounded by the device's timeout. */
  async confirm(deviceId: string): Promise<Record<string, number>> {
    const m = await this.driver(deviceId).readMetrics(CONFIRM_METRICS, PRIORITY.control, 0);
    this.telemetry.confirm(deviceId, m);
    return m;
  }

  setRemote(deviceId: string, remote: boolean): void {
    this.telemetry.setRemote(deviceId, remote);
  }
}

/**
 * The maximum power the config gives a device whose profile reads none (device sync shows
 * the same): a battery's nameplate, so that a brand without a rated-power register (the
 * Victron GX) still takes a share of an event.
 */
function nameplate(config: DeviceConfig): number | undefined {
  return typeof config.rated_power_w === "number" ? config.rated_power_w : undefined;
}
