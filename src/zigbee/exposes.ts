// What zigbee2mqtt's `bridge/devices` says a device can do (its `definition.exposes`), and
// its state messages turned into sitegate metrics. Pure: no MQTT here.
import type { Metrics } from "../devices/types.js";

export interface SetpointRange {
  property: string;
  min: number;
  max: number;
  step: number;
}

/** One device of the bridge's list, as far as sitegate uses it. */
export interface Z2mDevice {
  ieee_address: string;
  friendly_name: string;
  /** The on/off feature (`state`) with its values. */
  onOff?: { property: string; on: string; off: string };
  /** The heating setpoint of a `climate` expose. */
  setpoint?: SetpointRange;
  /** Reports its own power (W). */
  metering: boolean;
  model?: string;
  vendor?: string;
}

interface Expose {
  type?: unknown;
  name?: unknown;
  property?: unknown;
  features?: unknown;
  value_on?: unknown;
  value_off?: unknown;
  value_min?: unknown;
  value_max?: unknown;
  value_step?: unknown;
}

function flatten(list: unknown, out: Expose[] = []): Expose[] {
  if (!Array.isArray(list)) return out;
  for (const e of list) {
    if (!e || typeof e !== "object") continue;
    out.push(e as Expose);
    flatten((e as Expose).features, out);
  }
  return out;
}

const num = (v: unknown, d: number) => (typeof v === "number" && Number.isFinite(v) ? v : d);

/** Parses a `bridge/devices` payload: every end device with a definition (the coordinator and unsupported devices are left out). */
export function parseBridgeDevices(payload: unknown): Z2mDevice[] {
  if (!Array.isArray(payload)) return [];
  const out: Z2mDevice[] = [];
  for (const d of payload) {
    if (!d || typeof d !== "object") continue;
    const r = d as Record<string, unknown>;
    if (typeof r.ieee_address !== "string" || typeof r.friendly_name !== "string" || r.type === "Coordinator") continue;
    const def = r.definition && typeof r.definition === "object" ? (r.definition as Record<string, unknown>) : undefined;
    const exposes = flatten(def?.exposes);
    const dev: Z2mDevice = { ieee_address: r.ieee_address.toLowerCase(), friendly_name: r.friendly_name, metering: false };
    if (typeof def?.model === "string") dev.model = def.model;
    if (typeof def?.vendor === "string") dev.vendor = def.vendor;
    for (const e of exposes) {
      if (e.type === "binary" && e.property === "state" && typeof e.value_on === "string" && typeof e.value_off === "string")
        dev.onOff = { property: "state", on: e.value_on, off: e.value_off };
      if (e.type === "numeric" && (e.property === "occupied_heating_setpoint" || e.property === "current_heating_setpoint")) {
        dev.setpoint ??= { property: e.property, min: num(e.value_min, 5), max: num(e.value_max, 30), step: num(e.value_step, 0.5) };
      }
      if (e.type === "numeric" && e.property === "power") dev.metering = true;
    }
    out.push(dev);
  }
  return out;
}

/** A payload like {"state":"online"} or the legacy plain "online": true when online, undefined when unreadable. */
export function parseOnline(text: string): boolean | undefined {
  let v: unknown = text.trim();
  try {
    v = JSON.parse(text);
  } catch {
    /* the plain form */
  }
  const s = v && typeof v === "object" ? (v as Record<string, unknown>).state : v;
  if (s === "online") return true;
  if (s === "offline") return false;
  return undefined;
}

const round = (v: number, digits: number) => Math.round(v * 10 ** digits) / 10 ** digits;

/**
 * A state message as metrics (B6 names): `state` is 1/0 for a switch (on/off) and for a
 * thermostat (heating/idle), `power_w`, `energy_import_wh` (from kWh), `voltage_v`,
 * `current_a`, `temperature_c` (the room), `setpoint_c` (the heating setpoint).
 */
export function stateMetrics(dev: Pick<Z2mDevice, "onOff" | "setpoint">, payload: Record<string, unknown>): Metrics {
  const m: Metrics = {};
  const n = (k: string) => (typeof payload[k] === "number" && Number.isFinite(payload[k]) ? (payload[k] as number) : undefined);
  if (dev.setpoint) {
    const rs = payload.running_state;
    if (rs === "heat") m.state = 1;
    else if (rs === "idle") m.state = 0;
    const sp = n(dev.setpoint.property);
    if (sp !== undefined) m.setpoint_c = sp;
  } else if (dev.onOff && typeof payload[dev.onOff.property] === "string") {
    m.state = String(payload[dev.onOff.property]).toUpperCase() === dev.onOff.on.toUpperCase() ? 1 : 0;
  }
  const power = n("power");
  if (power !== undefined) m.power_w = power;
  const energy = n("energy");
  if (energy !== undefined) m.energy_import_wh = round(energy * 1000, 3);
  const voltage = n("voltage");
  if (voltage !== undefined) m.voltage_v = voltage;
  const current = n("current");
  if (current !== undefined) m.current_a = current;
  const t = n("local_temperature");
  if (t !== undefined) m.temperature_c = t;
  return m;
}
