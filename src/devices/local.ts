// Devices declared in the config file rather than paired (Zigbee through zigbee2mqtt,
// GPIO lines): what every such device class shares, whatever its transport. A switch
// offers `switch` (a shed switches it off), a thermostat `setpoint` (a shed sets it back
// by its setback_c from the setpoint held before the event). Their pre-event state for
// the ledger is their own JSON, {on} or {setpoint_c}. A ledger row an earlier release
// wrote holds another form (the register form those devices had then); a family whose
// devices have such rows reads them through `earlierPre`, and restore and verify take them.
import { SitegateError } from "../errors.js";
import type { Device, DeviceDescriptor, DeviceHealth, DeviceInfo, Metrics, PreState, Setpoint, Switchable } from "../model/device.js";
import { opModeCode, type Role } from "../model/roles.js";
import type { ActionName } from "../model/vocabulary.js";

/** The roles a declared device can have (roles.ts). */
export type LocalRole = Extract<Role, "switch" | "thermostat" | "input">;

/** A declared device's pre-event state. */
export interface LocalPre {
  on?: boolean;
  setpoint_c?: number;
}

/** A pre-state in the device's own form ({on, setpoint_c}); anything else holds nothing of it. */
export function localPre(pre: PreState): LocalPre {
  if (pre === null || typeof pre !== "object" || Array.isArray(pre)) return {};
  const p = pre as Record<string, unknown>;
  return {
    ...(typeof p.on === "boolean" ? { on: p.on } : {}),
    ...(typeof p.setpoint_c === "number" ? { setpoint_c: p.setpoint_c } : {}),
  };
}

/** A setpoint to 0.1 °C, the resolution it is compared at. */
const tenths = (c: number) => Math.round(c * 10);

/** A local device (Zigbee, GPIO): what it takes from its config entry and how it is driven, whatever its transport. */
export abstract class LocalDevice implements Device {
  readonly id: string;
  readonly device_id: string;
  readonly device_name?: string;
  /** The load a shed of it removes when it has no metering of its own (W). */
  readonly rated_power_w?: number;
  readonly shed_priority?: number;
  /** Thermostat: how far a shed lowers the heating setpoint (°C). */
  readonly setback_c?: number;
  abstract readonly role: LocalRole;
  /** The family that reaches it ("zigbee", "gpio"). */
  protected abstract readonly family: string;
  private remote = false;

  constructor(
    entry: Pick<LocalDevice, "device_id"> & Partial<Pick<LocalDevice, "device_name" | "rated_power_w" | "shed_priority" | "setback_c">>,
  ) {
    this.id = this.device_id = entry.device_id;
    this.device_name = entry.device_name;
    this.rated_power_w = entry.rated_power_w;
    this.shed_priority = entry.shed_priority;
    this.setback_c = entry.setback_c;
  }

  abstract descriptor(): DeviceDescriptor;
  /** Where the device is reached, for the status page (e.g. "zigbee2mqtt/washer-plug"). */
  abstract address(): string;
  abstract latest(): Metrics;
  /** Its health as its transport sees it. */
  protected abstract reported(): DeviceHealth;
  /** switch: whether it is on (asks the device when no state is known yet). */
  readOn?(): Promise<boolean>;
  /** switch: switches it, resolving once the device confirms; throws a SitegateError otherwise. */
  setOn?(on: boolean): Promise<void>;
  /** thermostat: the heating setpoint (°C). */
  readSetpoint?(): Promise<number>;
  /** thermostat: sets the heating setpoint (°C), resolving once the device confirms. */
  setSetpoint?(c: number): Promise<void>;

  /** A pre-state in a form an earlier release wrote, read by the family that wrote it; none: such a row holds nothing. */
  protected earlierPre(_pre: PreState): LocalPre {
    return {};
  }

  /** A ledger pre-state as this device's own: its own form, else the form an earlier release wrote. */
  private pre(pre: PreState): LocalPre {
    const own = localPre(pre);
    return own.on !== undefined || own.setpoint_c !== undefined ? own : this.earlierPre(pre);
  }

  holdsState(pre: PreState): boolean {
    const p = this.pre(pre);
    return p.on !== undefined || p.setpoint_c !== undefined;
  }

  info(): DeviceInfo {
    return {
      device_id: this.id,
      ...(this.device_name !== undefined ? { device_name: this.device_name } : {}),
      family: this.family,
      address: this.address(),
      ...(this.rated_power_w !== undefined ? { rated_power_w: this.rated_power_w } : {}),
      ...(this.shed_priority !== undefined ? { shed_priority: this.shed_priority } : {}),
      fully_configured: true,
    };
  }

  /** Health, with the remote op mode while dispatch drives it. */
  health(): DeviceHealth {
    const h = this.reported();
    return this.remote && h.online ? { ...h, op_mode: opModeCode("remote") } : h;
  }

  setRemote(remote: boolean): void {
    this.remote = remote;
  }

  get switch(): Switchable | undefined {
    return this.role === "switch" && this.setOn ? { switchOff: () => this.switchTo(false) } : undefined;
  }

  get setpoint(): Setpoint | undefined {
    if (this.role !== "thermostat" || !this.setSetpoint) return undefined;
    return { setback_c: this.setback_c ?? 2, setBack: (pre) => this.setBack(pre) };
  }

  /** From the setpoint of `pre` (or the device's own when it holds none): a retry never sets back twice. */
  private async setBack(pre: PreState): Promise<void> {
    const before = this.pre(pre).setpoint_c ?? (await this.setpointNow());
    await this.setpointTo((tenths(before) - tenths(this.setback_c ?? 2)) / 10);
  }

  private cannot(what: string): SitegateError {
    return new SitegateError("DEVICE_NOT_FOUND", `device ${this.id} (${this.role}) has no ${what}`);
  }

  private async isOn(): Promise<boolean> {
    if (!this.readOn) throw this.cannot("on/off state");
    return this.readOn();
  }

  private async switchTo(on: boolean): Promise<void> {
    if (!this.setOn) throw this.cannot("on/off output");
    await this.setOn(on);
  }

  private async setpointNow(): Promise<number> {
    if (!this.readSetpoint) throw this.cannot("heating setpoint");
    return this.readSetpoint();
  }

  private async setpointTo(c: number): Promise<void> {
    if (!this.setSetpoint) throw this.cannot("heating setpoint");
    await this.setSetpoint(c);
  }

  async capture(action: ActionName, held?: PreState): Promise<PreState> {
    if (action !== "shed" || (this.role !== "switch" && this.role !== "thermostat"))
      throw new SitegateError("DEVICE_NOT_FOUND", `device ${this.id} (${this.role}) has no ${action} action`);
    const pre = this.pre(held);
    if (this.role === "switch") return pre.on !== undefined ? pre : { ...pre, on: await this.isOn() };
    return pre.setpoint_c !== undefined ? pre : { ...pre, setpoint_c: await this.setpointNow() };
  }

  async revert(pre: PreState): Promise<void> {
    const p = this.pre(pre);
    if (p.on !== undefined) await this.switchTo(p.on);
    if (p.setpoint_c !== undefined) await this.setpointTo(p.setpoint_c);
  }

  async verify(pre: PreState): Promise<string | undefined> {
    const p = this.pre(pre);
    const diffs: string[] = [];
    if (p.on !== undefined) {
      const on = await this.isOn();
      if (on !== p.on) diffs.push(`reads ${on ? "on" : "off"}, was ${p.on ? "on" : "off"} before`);
    }
    if (p.setpoint_c !== undefined) {
      const c = await this.setpointNow();
      if (tenths(c) !== tenths(p.setpoint_c)) diffs.push(`setpoint reads ${c} °C, was ${p.setpoint_c} °C before`);
    }
    return diffs.length ? diffs.join("; ") : undefined;
  }

  /** The device reports on its own (a confirmed command came with a state message): its latest power. */
  async confirm(): Promise<Metrics> {
    const p = this.latest().power_w;
    return p === undefined ? {} : { power_w: p };
  }
}
