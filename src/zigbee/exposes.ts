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

/** Deeper nesting or more exposes than any real device has are left unread (a forged list must not cost a stack). */
const MAX_EXPOSE_DEPTH = 6;
const MAX_EXPOSES = 1000;

function flatten(list: unknown, out: Expose[] = [], depth = 0): Expose[] {
  if (!Array.isArray(list) || depth > MAX_EXPOSE_DEPTH) return out;
  for (const e of list) {
    if (out.length >= MAX_EXPOSES) break;
    if (!e || typeof e !== "object") continue;
    out.push(e as Expose);
    flatten((e as Expose).features, out, depth + 1);
  }
  return out;
}

/** A number within lo..hi, else the default. */
const num = (v: unknown, d: number, lo = -Infinity, hi = Infinity) =>
  typeof v === "number" && Number.isFinite(v) && v >= lo && v <= hi ? v : d;

/** A short printable string (a model, a vendor, an on/off value), else undefined. */
function shortText(v: unknown, max: number): string | undefined {
  if (typeof v !== "string" || v.length === 0 || v.length > max) return undefined;
  if (Buffer.from(v, "utf8").toString("utf8") !== v) return undefined;
  // oxlint-disable-next-line no-control-regex -- control characters are what this rejects
  if (/[\u0000-\u001f\u007f-\u009f]/.test(v)) return undefined;
  return v;
}

const IEEE = /^0x[0-9a-f]{16}$/i;

/** The heating setpoint range a device may expose: what a thermostat could mean, whatever the list says. */
function setpointRange(property: string, e: Expose): SetpointRange {
  let min = num(e.value_min, 5, 0, 60);
  let max = num(e.value_max, 30, 0, 60);
  if (min >= max) [min, max] = [5, 30];
  return { property, min, max, step: num(e.value_step, 0.5, 0.01, 5) };
}

/** Parses a `bridge/devices` payload: every end device with a definition (the coordinator and unsupported devices are left out). */
export function parseBridgeDevices(payload: unknown): Z2mDevice[] {
  if (!Array.isArray(payload)) return [];
  const out: Z2mDevice[] = [];
  for (const d of payload) {
    if (!d || typeof d !== "object") continue;
    const r = d as Record<string, unknown>;
    if (typeof r.ieee_address !== "string" || !IEEE.test(r.ieee_address) || typeof r.friendly_name !== "string") continue;
    if (r.type === "Coordinator") continue;
    const def = r.definition && typeof r.definition === "object" ? (r.definition as Record<string, unknown>) : undefined;
    const exposes = flatten(def?.exposes);
    // The name is checked by the bridge before it goes into a topic (it reports why it refuses one).
    const dev: Z2mDevice = { ieee_address: r.ieee_address.toLowerCase(), friendly_name: r.friendly_name, metering: false };
    const model = shortText(def?.model, 128);
    const vendor = shortText(def?.vendor, 128);
    if (model) dev.model = model;
    if (vendor) dev.vendor = vendor;
    for (const e of exposes) {
      const on = shortText(e.value_on, 32);
      const off = shortText(e.value_off, 32);
      if (e.type === "binary" && e.property === "state" && on && off && on.toUpperCase() !== off.toUpperCase())
        dev.onOff = { property: "state", on, off };
      if (e.type === "numeric" && (e.property === "occupied_heating_setpoint" || e.property === "current_heating_setpoint"))
        dev.setpoint ??= setpointRange(e.property, e);
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
