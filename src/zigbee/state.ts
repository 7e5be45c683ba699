// What a zigbee2mqtt message may carry into the gateway. Whoever can publish on the
// bridge's broker can publish any topic there, retained too, so every message is bounded
// before it is parsed: the device list by its size and by a count of its devices and of
// its objects made from the bytes (readDeviceList), every other topic by its size; a state
// message then by its keys, and only the readings sitegate uses are kept, each checked for
// its type and a range a real device can report. Pure: no MQTT here.

/** Far above a real state message (a few hundred bytes); parsing more would stall the event loop. */
export const MAX_STATE_BYTES = 64 * 1024;
export const MAX_STATE_KEYS = 256;
/** bridge/state and availability: {"state":"online"} and little else. */
export const MAX_STATUS_BYTES = 1024;
/** Every topic but bridge/devices (bridge/info included): like a state message. */
export const MAX_MESSAGE_BYTES = MAX_STATE_BYTES;
/** bridge/devices: a real entry is a few hundred bytes to a few KiB. */
export const MAX_DEVICES_BYTES = 1024 * 1024;
export const MAX_DEVICES = 1000;
/** Objects and arrays of the whole list: a real entry has a few dozen (its exposes and their features). */
export const MAX_DEVICES_NODES = 100_000;
/**
 * The broker drops anything larger for this client (MQTT 5 Maximum Packet Size). Above the
 * caps, so that a message over them still arrives to be counted and refused by its length
 * (a Buffer outside the heap, never parsed).
 */
export const MAX_PACKET_BYTES = 4 * 1024 * 1024;

type Check = (v: unknown) => boolean;
const word: Check = (v) => typeof v === "string" && v.length > 0 && v.length <= 32;
const within =
  (lo: number, hi: number): Check =>
  (v) =>
    typeof v === "number" && Number.isFinite(v) && v >= lo && v <= hi;

/** The readings sitegate uses, by zigbee2mqtt property, with what each may be. */
const READINGS: Readonly<Record<string, Check>> = {
  state: word,
  running_state: word,
  occupied_heating_setpoint: within(0, 60),
  current_heating_setpoint: within(0, 60),
  /** W: a plug switches at most a few kW; a DIN-rail meter on Zigbee, tens. */
  power: within(-100_000, 100_000),
  /** kWh since the device was reset. */
  energy: within(0, 10_000_000),
  voltage: within(0, 1000),
  current: within(0, 1000),
  /** °C in a room. */
  local_temperature: within(-50, 100),
};

export type StateValues = Record<string, string | number>;

export type StateVerdict =
  | { ok: true; values: StateValues; refused: string[] }
  | { ok: false; reason: "too_large" | "not_json" | "not_object" | "too_many_keys"; detail: string };

/** A state message's readings (those sitegate uses and believes); `refused` names the used ones that were not believable. */
export function readState(payload: Buffer): StateVerdict {
  if (payload.length > MAX_STATE_BYTES)
    return { ok: false, reason: "too_large", detail: `${payload.length} bytes (at most ${MAX_STATE_BYTES})` };
  let json: unknown;
  try {
    json = JSON.parse(payload.toString("utf8"));
  } catch {
    return { ok: false, reason: "not_json", detail: "not JSON" };
  }
  if (!json || typeof json !== "object" || Array.isArray(json)) return { ok: false, reason: "not_object", detail: "not a JSON object" };
  const keys = Object.keys(json);
  if (keys.length > MAX_STATE_KEYS)
    return { ok: false, reason: "too_many_keys", detail: `${keys.length} keys (at most ${MAX_STATE_KEYS})` };
  const values: StateValues = {};
  const refused: string[] = [];
  const record = json as Record<string, unknown>;
  for (const k of keys) {
    const check = Object.hasOwn(READINGS, k) ? READINGS[k] : undefined;
    if (!check) continue;
    if (check(record[k])) values[k] = record[k] as string | number;
    else refused.push(k);
  }
  return { ok: true, values, refused };
}

export type ListVerdict =
  | { ok: true; list: unknown[] }
  | { ok: false; reason: "too_large" | "too_many_devices" | "bad_list"; detail: string };

/**
 * The bridge's device list, parsed only when it is within the caps: its size, its devices
 * and its objects and arrays are counted from the bytes first (JSON.parse of 4 MiB of `{}`
 * makes 1.4 M objects, more than the daemon's heap holds).
 */
export function readDeviceList(payload: Buffer): ListVerdict {
  if (payload.length > MAX_DEVICES_BYTES)
    return { ok: false, reason: "too_large", detail: `${payload.length} bytes (at most ${MAX_DEVICES_BYTES})` };
  const shape = listShape(payload);
  if (!shape) return { ok: false, reason: "bad_list", detail: "not a JSON array" };
  if (shape.items > MAX_DEVICES) return { ok: false, reason: "too_many_devices", detail: `over ${MAX_DEVICES} devices` };
  if (shape.nodes > MAX_DEVICES_NODES)
    return { ok: false, reason: "too_many_devices", detail: `over ${MAX_DEVICES_NODES} objects and arrays` };
  let json: unknown;
  try {
    json = JSON.parse(payload.toString("utf8"));
  } catch {
    return { ok: false, reason: "bad_list", detail: "not JSON" };
  }
  if (!Array.isArray(json)) return { ok: false, reason: "bad_list", detail: "not a JSON array" };
  return { ok: true, list: json };
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const OPEN = new Set([0x5b, 0x7b]);
const CLOSE = new Set([0x5d, 0x7d]);

/**
 * A JSON array's top-level items and its objects and arrays, counted in one pass over the
 * bytes (strings skipped) and only as far as the caps; null when the bytes do not start an
 * array. Malformed JSON counts as whatever it looks like: JSON.parse refuses it after.
 */
function listShape(b: Buffer): { items: number; nodes: number } | null {
  let i = 0;
  while (i < b.length && b[i]! <= 0x20) i++;
  if (b[i] !== 0x5b) return null;
  let depth = 0;
  let commas = 0;
  let nodes = 0;
  let seen = false;
  let inString = false;
  for (; i < b.length && commas < MAX_DEVICES && nodes <= MAX_DEVICES_NODES; i++) {
    const c = b[i]!;
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
    } else if (c === QUOTE) {
      inString = true;
      if (depth === 1) seen = true;
    } else if (OPEN.has(c)) {
      if (depth === 1) seen = true;
      depth++;
      nodes++;
    } else if (CLOSE.has(c)) depth--;
    else if (c === COMMA && depth === 1) commas++;
    else if (depth === 1 && c > 0x20) seen = true;
  }
  return { items: commas + (seen ? 1 : 0), nodes };
}
