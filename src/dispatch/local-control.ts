// Dispatch's view of the devices on other transports (Zigbee, GPIO): each presents itself
// as a tiny register map behind the same DeviceControl interface as a Modbus device, so
// the device ledger, the release after a crash, restore and shed stepping work on them
// unchanged:
//   a switch (Zigbee plug, GPIO output)  coil 0           on/off
//   a thermostat                          holding 0        heating setpoint in 0.1 °C
// A shed switches a switch off, and lowers a thermostat's setpoint by its setback_c from
// the setpoint it had before the event (the ledger's value when it holds one, so a retry
// or a restart never sets it back twice).
import { SitegateError } from "../errors.js";
import type { LocalDevice, LocalDevices } from "../devices/local.js";
import type { ActionName } from "../profiles/schema.js";
import type { DispatchDevice } from "./allocate.js";
import type { ActionParams, DeviceControl, RawWrite } from "./control.js";

const SHED_ROLES = new Set(["switch", "thermostat"]);

export class LocalDeviceControl implements DeviceControl {
  constructor(private readonly local: LocalDevices) {}

  has(deviceId: string): boolean {
    return this.local.get(deviceId) !== undefined;
  }

  devices(): DispatchDevice[] {
    return this.local.list().map((d) => {
      const desc = d.descriptor();
      return {
        device_id: d.device_id,
        role: desc.role,
        capabilities: desc.capabilities,
        max_power_w: desc.max_power_w,
        fully_configured: true,
        online: this.local.health(d.device_id)?.online ?? false,
        metrics: { ...d.latest() },
        rated_power_w: d.rated_power_w,
        shed_priority: d.shed_priority,
      };
    });
  }

  private dev(deviceId: string): LocalDevice {
    const d = this.local.get(deviceId);
    if (!d) throw new SitegateError("DEVICE_NOT_FOUND", `device ${deviceId} is not configured`);
    return d;
  }

  hasAction(deviceId: string, action: ActionName): boolean {
    const d = this.local.get(deviceId);
    return !!d && action === "shed" && SHED_ROLES.has(d.role);
  }

  refreshMs(): number {
    return 0; // a switch or a setpoint holds by itself
  }

  async plan(deviceId: string, action: ActionName, params: ActionParams): Promise<RawWrite[]> {
    const d = this.dev(deviceId);
    if (action !== "shed" || !SHED_ROLES.has(d.role))
      throw new SitegateError("DEVICE_NOT_FOUND", `device ${deviceId} (${d.role}) has no ${action} action`);
    if (d.role === "switch") return [{ table: "coil", address: 0, words: [], coils: [false] }];
    const held = params.held?.find((w) => w.table === "holding" && w.address === 0)?.words[0];
    const before = held ?? Math.round((await d.readSetpoint!()) * 10);
    return [{ table: "holding", address: 0, words: [before - Math.round((d.setback_c ?? 2) * 10)], coils: [] }];
  }

  async read(deviceId: string, table: "holding" | "coil", address: number, count: number): Promise<number[]> {
    const d = this.dev(deviceId);
    if (count === 1 && address === 0 && table === "coil" && d.readOn) return [(await d.readOn()) ? 1 : 0];
    if (count === 1 && address === 0 && table === "holding" && d.readSetpoint) return [Math.round((await d.readSetpoint()) * 10)];
    throw new SitegateError(
      "DEVICE_NOT_FOUND",
      `device ${deviceId} has no ${table} ${address}${count > 1 ? `..${address + count - 1}` : ""}`,
    );
  }

  async write(deviceId: string, writes: readonly RawWrite[]): Promise<void> {
    const d = this.dev(deviceId);
    for (const w of writes) {
      if (w.table === "coil" && w.address === 0 && w.coils.length === 1 && d.setOn) await d.setOn(w.coils[0]);
      else if (w.table === "holding" && w.address === 0 && w.words.length === 1 && d.setSetpoint) await d.setSetpoint(w.words[0] / 10);
      else throw new SitegateError("DEVICE_NOT_FOUND", `device ${deviceId} has no ${w.table} ${w.address} to write`);
    }
  }

  /** The device reports on its own (a confirmed command came with a state message): its latest power. */
  async confirm(deviceId: string): Promise<Record<string, number>> {
    const p = this.dev(deviceId).latest().power_w;
    return p === undefined ? {} : { power_w: p };
  }

  setRemote(deviceId: string, remote: boolean): void {
    this.local.setRemote(deviceId, remote);
  }
}

/** Routes each call by device_id: a local device to its transport, every other to Modbus. */
export class CompositeDeviceControl implements DeviceControl {
  constructor(
    private readonly modbus: DeviceControl,
    private readonly local: LocalDeviceControl,
  ) {}

  private of(id: string): DeviceControl {
    return this.local.has(id) ? this.local : this.modbus;
  }

  devices(): DispatchDevice[] {
    return [...this.modbus.devices(), ...this.local.devices()];
  }

  plan(id: string, action: ActionName, params: ActionParams): Promise<RawWrite[]> {
    return this.of(id).plan(id, action, params);
  }

  read(id: string, table: "holding" | "coil", address: number, count: number, unit?: number): Promise<number[]> {
    return this.of(id).read(id, table, address, count, unit);
  }

  async readBack(id: string, action: ActionName): Promise<void> {
    await this.of(id).readBack?.(id, action);
  }

  write(id: string, writes: readonly RawWrite[]): Promise<void> {
    return this.of(id).write(id, writes);
  }

  confirm(id: string): Promise<Record<string, number>> {
    return this.of(id).confirm(id);
  }

  hasAction(id: string, action: ActionName): boolean {
    return this.of(id).hasAction(id, action);
  }

  refreshMs(id: string): number {
    return this.of(id).refreshMs(id);
  }

  setRemote(id: string, remote: boolean): void {
    this.of(id).setRemote(id, remote);
  }
}
