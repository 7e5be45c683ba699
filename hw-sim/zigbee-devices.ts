// Zigbee devices behind the simulated zigbee2mqtt bridge: a smart plug (on/off, optional
// power metering) and a heating thermostat with a simple room model. Each is a load on the
// site model, so the grid meter sees what they draw. The bridge (zigbee.ts) carries their
// state to MQTT in zigbee2mqtt's message shapes; this file only knows the physics and the
// properties (`state`, `power`, `occupied_heating_setpoint`, ...) those messages hold.
import type { SiteLoad, SiteModel } from "./site-model.js";
import type { ZigbeeDeviceSpec } from "./scenario.js";
import { hashString, noise } from "./random.js";

export const ZIGBEE_FAULTS = ["no_answer", "ignore_writes", "delay"] as const;
export type ZigbeeFault = (typeof ZIGBEE_FAULTS)[number];

export interface ZigbeeWrite {
  at: string;
  topic: string;
  payload: unknown;
  /** Why the device did not act on it: "bridge offline", "no_answer", "ignore_writes", "invalid". */
  ignored?: string;
}

/** What applying a /set payload did: the properties that changed and the ones refused. */
export interface SetResult {
  changed: string[];
  errors: string[];
}

const r1 = (x: number) => Math.round(x * 10) / 10;
const r2 = (x: number) => Math.round(x * 100) / 100;

/** A numeric expose (zigbee2mqtt exposes format; access: 1 published, 2 settable, 4 gettable). */
function numeric(name: string, unit: string, access: number, description: string, extra: Record<string, unknown> = {}) {
  return {
    type: "numeric",
    name,
    property: name,
    label: name.charAt(0).toUpperCase() + name.slice(1).replace(/_/g, " "),
    access,
    unit,
    description,
    ...extra,
  };
}

function enumExpose(name: string, values: string[], access: number, description: string) {
  return {
    type: "enum",
    name,
    property: name,
    label: name.charAt(0).toUpperCase() + name.slice(1).replace(/_/g, " "),
    access,
    values,
    description,
  };
}

export abstract class ZigbeeDevice implements SiteLoad {
  readonly name: string;
  readonly ieee: string;
  readonly networkAddress: number;
  readonly faults = new Map<ZigbeeFault, { fault: ZigbeeFault; delay_ms?: number }>();
  readonly writes: ZigbeeWrite[] = [];
  load_w: number;
  energyKwh: number;
  /** A change worth an immediate report happened since the last state message. */
  dirty = false;
  lastReportMs = 0;
  /** Commands received (also the step of the seeded answer delay). */
  commands = 0;
  protected readonly key: number;

  constructor(
    readonly spec: ZigbeeDeviceSpec,
    protected readonly site: SiteModel,
    readonly reportIntervalMs: number,
  ) {
    this.name = spec.friendly_name;
    this.key = hashString(spec.friendly_name);
    this.ieee = spec.ieee_address ?? `0x00124b00${((this.key ^ Math.imul(site.seed, 0x9e3779b1)) >>> 0).toString(16).padStart(8, "0")}`;
    this.networkAddress = 1 + (((this.key ^ site.seed) >>> 0) % 0xfff0);
    this.load_w = spec.load_w;
    this.energyKwh = spec.energy_kwh;
    site.loads.push(this);
  }

  abstract readonly kind: "plug" | "thermostat";
  /** Power drawn now, W (what the site balance and the metering see). */
  abstract loadW(): number;
  /** zigbee2mqtt `definition` (model, vendor, description, exposes, options). */
  abstract definition(): Record<string, unknown>;
  /** The properties of a state message (without linkquality). */
  protected abstract properties(): Record<string, unknown>;
  /** Applies a /set payload as the device would; refused properties end up in errors. */
  abstract apply(payload: Record<string, unknown>): SetResult;
  /** Test hooks: physical state set by hand (state, load_w, local_temperature...). */
  abstract setByHand(values: Record<string, unknown>): void;
  abstract view(): Record<string, unknown>;

  /** The load with seeded noise, a function of (seed, name, simulated second). */
  protected noisy(w: number): number {
    if (w === 0 || this.spec.load_noise_pct === 0) return w;
    return w * (1 + (this.spec.load_noise_pct / 100) * noise(this.site.seed, this.key, Math.floor(this.site.clock() / 1000)));
  }

  integrate(dtS: number, _nowMs: number): void {
    this.energyKwh += (this.loadW() * dtS) / 3_600_000;
  }

  get online(): boolean {
    return !this.faults.has("no_answer");
  }

  /** Link quality as a device reports it: seeded, changes every minute. */
  linkquality(): number {
    return Math.round(150 + 60 * noise(this.site.seed, this.key ^ 0x51, Math.floor(this.site.clock() / 60_000)));
  }

  /** The JSON of a state message on {base}/{friendly_name}. */
  stateMessage(): Record<string, unknown> {
    this.site.advance();
    return { ...this.properties(), linkquality: this.linkquality() };
  }

  protected meteringProps(): Record<string, unknown> {
    if (!this.spec.metering) return {};
    const p = this.loadW();
    return { power: r1(p), energy: r2(this.energyKwh), voltage: r1(this.site.voltage_v), current: r2(p / this.site.voltage_v) };
  }

  protected meteringExposes(): unknown[] {
    if (!this.spec.metering) return [];
    return [
      numeric("power", "W", 5, "Instantaneous measured power"),
      numeric("energy", "kWh", 5, "Sum of consumed energy"),
      numeric("voltage", "V", 5, "Measured electrical potential value"),
      numeric("current", "A", 5, "Instantaneous measured electrical current"),
    ];
  }

  protected linkqualityExpose(): unknown {
    return {
      ...numeric("linkquality", "lqi", 1, "Link quality (signal strength)", { value_min: 0, value_max: 255 }),
      label: "Linkquality",
    };
  }

  protected baseView(): Record<string, unknown> {
    return {
      model: `zigbee-${this.kind}`,
      ieee_address: this.ieee,
      online: this.online,
      power_w: r1(this.loadW()),
      load_w: this.load_w,
      energy_kwh: r2(this.energyKwh),
      faults: [...this.faults.values()],
      writes: this.writes,
    };
  }

  protected setLoad(v: unknown): void {
    if (typeof v !== "number" || !(v >= 0 && v <= 20000)) throw new Error("load_w must be a number 0..20000");
    this.site.advance();
    this.load_w = v;
    this.site.advance();
    this.dirty = true;
  }
}

function onOff(v: unknown, current: boolean): boolean | null {
  if (typeof v !== "string") return null;
  const s = v.toUpperCase();
  return s === "ON" ? true : s === "OFF" ? false : s === "TOGGLE" ? !current : null;
}

export class ZigbeePlug extends ZigbeeDevice {
  readonly kind = "plug";
  on: boolean;

  constructor(spec: ZigbeeDeviceSpec, site: SiteModel, reportIntervalMs: number) {
    super(spec, site, reportIntervalMs);
    this.on = spec.on;
  }

  loadW(): number {
    return this.on ? this.noisy(this.load_w) : 0;
  }

  definition(): Record<string, unknown> {
    return {
      model: this.spec.metering ? "SG-PLUG-16M" : "SG-PLUG-16",
      vendor: "sitegate-sim",
      description: this.spec.metering ? "Smart plug 16 A with power monitoring (simulated)" : "Smart plug 16 A (simulated)",
      supports_ota: false,
      options: [],
      exposes: [
        {
          type: "switch",
          features: [
            {
              type: "binary",
              name: "state",
              property: "state",
              label: "State",
              access: 7,
              value_on: "ON",
              value_off: "OFF",
              value_toggle: "TOGGLE",
              description: "On/off state of the switch",
            },
          ],
        },
        enumExpose(
          "power_on_behavior",
          ["off", "on", "toggle", "previous"],
          7,
          "Controls the behavior when the device is powered on after power loss",
        ),
        ...this.meteringExposes(),
        this.linkqualityExpose(),
      ],
    };
  }

  protected properties(): Record<string, unknown> {
    return { state: this.on ? "ON" : "OFF", power_on_behavior: "previous", ...this.meteringProps() };
  }

  apply(payload: Record<string, unknown>): SetResult {
    const out: SetResult = { changed: [], errors: [] };
    for (const [k, v] of Object.entries(payload)) {
      if (k === "state") {
        const next = onOff(v, this.on);
        if (next === null) out.errors.push(`state: '${String(v)}' is not ON, OFF or TOGGLE`);
        else {
          this.switch(next);
          out.changed.push("state");
        }
      } else if (k === "power_on_behavior") {
        out.changed.push(k); // accepted and kept at "previous": it only matters after a power loss
      } else out.errors.push(`No converter available for '${k}' (${JSON.stringify(v)})`);
    }
    return out;
  }

  private switch(on: boolean): void {
    this.site.advance();
    this.on = on;
    this.site.advance();
  }

  setByHand(values: Record<string, unknown>): void {
    for (const [k, v] of Object.entries(values)) {
      if (k === "state") {
        const next = onOff(v, this.on);
        if (next === null) throw new Error('state must be "ON", "OFF" or "TOGGLE"');
        this.switch(next);
        this.dirty = true;
      } else if (k === "load_w") this.setLoad(v);
      else throw new Error(`zigbee plug ${this.name} has no settable ${k}`);
    }
  }

  view(): Record<string, unknown> {
    return { ...this.baseView(), state: this.on ? "ON" : "OFF" };
  }
}

/** Heater gain (degC per hour at full power) and the room's loss time constant (hours). */
const HEAT_GAIN_C_PER_H = 3;
const LOSS_TAU_H = 8;
/** Two-point control around the setpoint: heat below sp - 0.3, stop at sp + 0.2. */
const HYST_ON_C = 0.3;
const HYST_OFF_C = 0.2;
const SETPOINT_MIN = 5;
const SETPOINT_MAX = 30;

export class ZigbeeThermostat extends ZigbeeDevice {
  readonly kind = "thermostat";
  setpointC: number;
  roomC: number;
  systemMode: "heat" | "off" = "heat";
  heating = false;
  private reportedRoomC: number;

  constructor(spec: ZigbeeDeviceSpec, site: SiteModel, reportIntervalMs: number) {
    super(spec, site, reportIntervalMs);
    this.setpointC = spec.setpoint_c;
    this.roomC = spec.room_c ?? spec.setpoint_c;
    this.reportedRoomC = r1(this.roomC);
    this.control();
  }

  loadW(): number {
    return this.heating ? this.noisy(this.load_w) : 0;
  }

  /** Decides heating from the room temperature, the setpoint and the mode; true when it changed. */
  private control(): boolean {
    const was = this.heating;
    if (this.systemMode === "off") this.heating = false;
    else if (this.heating && this.roomC >= this.setpointC + HYST_OFF_C) this.heating = false;
    else if (!this.heating && this.roomC <= this.setpointC - HYST_ON_C) this.heating = true;
    return was !== this.heating;
  }

  override integrate(dtS: number, nowMs: number): void {
    super.integrate(dtS, nowMs);
    // Explicit steps of at most a minute so the two-point control switches near its thresholds.
    let left = dtS;
    while (left > 0) {
      const h = Math.min(left, 60) / 3600;
      this.roomC += ((this.heating ? HEAT_GAIN_C_PER_H : 0) - (this.roomC - this.spec.ambient_c) / LOSS_TAU_H) * h;
      if (this.control()) this.dirty = true;
      left -= 60;
    }
    if (Math.abs(r1(this.roomC) - this.reportedRoomC) >= 0.2) this.dirty = true;
  }

  definition(): Record<string, unknown> {
    return {
      model: this.spec.metering ? "SG-TRV-E2M" : "SG-TRV-E2",
      vendor: "sitegate-sim",
      description: this.spec.metering
        ? "Electric heating thermostat with power monitoring (simulated)"
        : "Electric heating thermostat (simulated)",
      supports_ota: false,
      options: [],
      exposes: [
        {
          type: "climate",
          features: [
            numeric("occupied_heating_setpoint", "°C", 7, "Temperature setpoint", {
              value_min: SETPOINT_MIN,
              value_max: SETPOINT_MAX,
              value_step: 0.5,
            }),
            numeric("local_temperature", "°C", 5, "Current temperature measured on the device"),
            enumExpose("system_mode", ["off", "heat"], 7, "Mode of this device"),
            enumExpose("running_state", ["idle", "heat"], 5, "The current running state"),
          ],
        },
        ...this.meteringExposes(),
        this.linkqualityExpose(),
      ],
    };
  }

  protected properties(): Record<string, unknown> {
    this.reportedRoomC = r1(this.roomC);
    return {
      local_temperature: this.reportedRoomC,
      occupied_heating_setpoint: this.setpointC,
      system_mode: this.systemMode,
      running_state: this.heating ? "heat" : "idle",
      ...this.meteringProps(),
    };
  }

  apply(payload: Record<string, unknown>): SetResult {
    const out: SetResult = { changed: [], errors: [] };
    this.site.advance();
    for (const [k, v] of Object.entries(payload)) {
      if (k === "occupied_heating_setpoint") {
        const n = typeof v === "string" && v.trim() !== "" ? Number(v) : v;
        if (typeof n !== "number" || !Number.isFinite(n)) out.errors.push(`occupied_heating_setpoint: '${String(v)}' is not a number`);
        else if (n < SETPOINT_MIN || n > SETPOINT_MAX)
          out.errors.push(`occupied_heating_setpoint: ${n} is not in range ${SETPOINT_MIN}..${SETPOINT_MAX}`);
        else {
          this.setpointC = Math.round(n * 100) / 100; // the ZCL attribute holds centi-degrees
          out.changed.push(k);
        }
      } else if (k === "system_mode") {
        if (v !== "heat" && v !== "off") out.errors.push(`system_mode: '${String(v)}' is not one of off, heat`);
        else {
          this.systemMode = v;
          out.changed.push(k);
        }
      } else out.errors.push(`No converter available for '${k}' (${JSON.stringify(v)})`);
    }
    this.control();
    this.site.advance();
    return out;
  }

  setByHand(values: Record<string, unknown>): void {
    this.site.advance();
    for (const [k, v] of Object.entries(values)) {
      if (k === "local_temperature") {
        if (typeof v !== "number" || !(v >= -10 && v <= 40)) throw new Error("local_temperature must be a number -10..40");
        this.roomC = v;
      } else if (k === "load_w") this.setLoad(v);
      else if (k === "occupied_heating_setpoint" || k === "system_mode") {
        const r = this.apply({ [k]: v });
        if (r.errors.length) throw new Error(r.errors.join("; "));
      } else throw new Error(`zigbee thermostat ${this.name} has no settable ${k}`);
    }
    this.control();
    this.site.advance();
    this.dirty = true;
  }

  view(): Record<string, unknown> {
    return {
      ...this.baseView(),
      state: this.heating ? "heat" : "idle",
      setpoint_c: this.setpointC,
      local_temperature_c: r2(this.roomC),
      system_mode: this.systemMode,
      running_state: this.heating ? "heat" : "idle",
    };
  }
}

export function buildZigbeeDevice(spec: ZigbeeDeviceSpec, site: SiteModel, reportIntervalMs: number): ZigbeeDevice {
  return spec.kind === "plug" ? new ZigbeePlug(spec, site, reportIntervalMs) : new ZigbeeThermostat(spec, site, reportIntervalMs);
}
