// One configured Zigbee device (a plug or a relay: a switch; a thermostat: a setpoint)
// behind its zigbee2mqtt bridge: its place in the bridge's device list, its latest state,
// and its commands, each counted done only once a state message shows it.
import { SitegateError } from "../errors.js";
import { LocalDevice, type LocalPre, type LocalRole } from "../devices/local.js";
import { declaredFromRegisters } from "../modbus/device/pre-state.js";
import { capabilitiesOf, type DeviceDescriptor, type DeviceHealth, type Metrics, type PreState } from "../model/device.js";
import { opModeCode } from "../model/roles.js";
import { zigbeeRoleOf, zigbeeTyped } from "./wire-types.js";
import type { ZigbeeDeviceConfig } from "./config-schema.js";
import { stateMetrics, type Z2mDevice } from "./exposes.js";
import type { StateValues } from "./state.js";

/** What a device needs of its bridge: whether it is reachable, its topics, and a publish. */
export interface BridgeLink {
  readonly baseTopic: string;
  readonly commandTimeoutMs: number;
  readonly connected: boolean;
  readonly bridgeOnline: boolean | undefined;
  publish(sub: string, body: Record<string, unknown>): Promise<void>;
}

interface Waiter {
  match: (payload: StateValues) => boolean;
  resolve: (payload: StateValues) => void;
}

/** One configured Zigbee device: its place in the bridge's list, its latest state, commands awaiting confirmation. */
export class ZigbeeDevice extends LocalDevice {
  readonly role: LocalRole;
  protected readonly family = "zigbee";
  /** Its entry in the bridge's device list. */
  listed: Z2mDevice | undefined;
  /** The bridge's list names this device, under a name that cannot go into a topic. */
  refusedName: { name: string; why: string } | undefined;
  available: boolean | undefined;
  private payload: StateValues = {};
  private metrics: Metrics = {};
  private lastOk: string | null = null;
  private waiters = new Set<Waiter>();

  constructor(
    readonly cfg: ZigbeeDeviceConfig,
    private readonly bridge: BridgeLink,
  ) {
    super(cfg);
    this.role = zigbeeRoleOf(cfg.device_type) === "thermostat" ? "thermostat" : "switch";
  }

  /** A ledger row of an earlier release holds the register form these devices had then (the Modbus family reads it). */
  protected override earlierPre(pre: PreState): LocalPre {
    return declaredFromRegisters(pre);
  }

  /** The name its topics use: the friendly name from the bridge's list (or the config's until the list arrives). */
  get topicName(): string | undefined {
    return this.listed?.friendly_name ?? this.cfg.friendly_name;
  }

  descriptor(): DeviceDescriptor {
    const identity: Record<string, string> = {};
    if (this.listed) identity.ieee_address = this.listed.ieee_address;
    if (this.listed?.model) identity.model = this.listed.model;
    if (this.listed?.vendor) identity.manufacturer = this.listed.vendor;
    return {
      ...zigbeeTyped(this.role),
      ...(this.rated_power_w !== undefined ? { max_power_w: this.rated_power_w } : {}),
      capabilities: capabilitiesOf(this),
      profile: "zigbee2mqtt",
      identity,
    };
  }

  address(): string {
    return `${this.bridge.baseTopic}/${this.topicName ?? this.cfg.ieee_address}`;
  }

  /** Why the device cannot be used now, or undefined when it can. */
  private offlineReason(): string | undefined {
    if (!this.bridge.connected) return "the bridge's broker is not connected";
    if (this.bridge.bridgeOnline !== true) return "the zigbee2mqtt bridge is offline";
    if (this.refusedName)
      return `the bridge's list names it ${JSON.stringify(this.refusedName.name.slice(0, 100))}, which ${this.refusedName.why}`;
    if (!this.listed) return "not in the bridge's device list";
    if (this.available === false) return "the bridge reports it offline";
    if (this.lastOk === null) return "no state reported yet";
    return undefined;
  }

  protected reported(): DeviceHealth {
    const why = this.offlineReason();
    return {
      online: !why,
      last_ok_at: this.lastOk,
      last_error: why ?? null,
      consecutive_failures: 0,
      op_mode: opModeCode(why ? "unknown" : "automatic"),
    };
  }

  latest(): Metrics {
    return this.metrics;
  }

  /** The metrics again from the state known so far (the bridge's list may come after a state message). */
  refresh(): void {
    this.metrics = this.listed ? stateMetrics(this.listed, this.payload) : {};
  }

  /** Readings already checked (readState): merged over the known ones, a bounded set of keys. */
  onState(values: StateValues): void {
    Object.assign(this.payload, values);
    this.refresh();
    this.lastOk = new Date().toISOString();
    for (const w of [...this.waiters]) {
      if (w.match(this.payload)) {
        this.waiters.delete(w);
        w.resolve(this.payload);
      }
    }
  }

  private usable(): Z2mDevice {
    const why = this.offlineReason();
    if (why && !(why === "no state reported yet" && this.listed))
      throw new SitegateError("DEVICE_OFFLINE", `${this.device_id}: ${why}`, { transient: true });
    return this.listed!;
  }

  /** Publishes to `{name}/{suffix}` and waits for a state message that `match` accepts. */
  private async command(
    suffix: "set" | "get",
    body: Record<string, unknown>,
    match: (p: StateValues) => boolean,
    what: string,
  ): Promise<StateValues> {
    const name = this.topicName!;
    const timeoutMs = this.bridge.commandTimeoutMs;
    let timer: NodeJS.Timeout | undefined;
    let waiter!: Waiter;
    const confirmed = new Promise<StateValues>((resolve, reject) => {
      waiter = { match, resolve };
      this.waiters.add(waiter);
      timer = setTimeout(() => {
        this.waiters.delete(waiter);
        reject(
          new SitegateError("DEVICE_TIMEOUT", `${this.device_id} (${name}) did not confirm ${what} within ${timeoutMs} ms`, {
            transient: true,
          }),
        );
      }, timeoutMs);
    });
    // The timeout may fire while the publish still waits for the broker's acknowledgement.
    confirmed.catch(() => undefined);
    try {
      await this.bridge.publish(`${name}/${suffix}`, body);
      return await confirmed;
    } catch (e) {
      this.waiters.delete(waiter);
      throw e;
    } finally {
      clearTimeout(timer);
    }
  }

  override async readOn(): Promise<boolean> {
    const info = this.usable();
    if (!info.onOff) throw new SitegateError("DEVICE_NOT_FOUND", `${this.device_id} exposes no on/off state`);
    const { property, on } = info.onOff;
    const known = (p: StateValues) => typeof p[property] === "string";
    const p = known(this.payload) ? this.payload : await this.command("get", { [property]: "" }, known, "a state read");
    return String(p[property]).toUpperCase() === on.toUpperCase();
  }

  override async setOn(want: boolean): Promise<void> {
    const info = this.usable();
    if (!info.onOff) throw new SitegateError("DEVICE_NOT_FOUND", `${this.device_id} exposes no on/off state`);
    const { property, on, off } = info.onOff;
    const value = want ? on : off;
    await this.command(
      "set",
      { [property]: value },
      (p) => String(p[property]).toUpperCase() === value.toUpperCase(),
      `${property} ${value}`,
    );
  }

  override async readSetpoint(): Promise<number> {
    const info = this.usable();
    if (!info.setpoint) throw new SitegateError("DEVICE_NOT_FOUND", `${this.device_id} exposes no heating setpoint`);
    const prop = info.setpoint.property;
    const known = (p: StateValues) => typeof p[prop] === "number";
    const p = known(this.payload) ? this.payload : await this.command("get", { [prop]: "" }, known, "a setpoint read");
    return p[prop] as number;
  }

  override async setSetpoint(c: number): Promise<void> {
    const info = this.usable();
    if (!info.setpoint) throw new SitegateError("DEVICE_NOT_FOUND", `${this.device_id} exposes no heating setpoint`);
    const { property, min, max, step } = info.setpoint;
    const value = Math.round(Math.round(c / step) * step * 100) / 100;
    if (value < min || value > max)
      throw new SitegateError("CONTROL_VALUE_INVALID", `${this.device_id}: setpoint ${value} °C is outside ${min}..${max} °C`);
    await this.command(
      "set",
      { [property]: value },
      (p) => typeof p[property] === "number" && Math.abs((p[property] as number) - value) < 1e-6,
      `${property} ${value}`,
    );
  }
}
