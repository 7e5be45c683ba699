// What a zigbee2mqtt state message may carry into the gateway. Whoever can publish on the
// bridge's broker can publish a device's state topic, so a message is bounded before it
// is parsed (size) and after (keys), and only the readings sitegate uses are kept, each
// checked for its type and a range a real device can report. Pure: no MQTT here.

/** Far above a real state message (a few hundred bytes); parsing more would stall the event loop. */
export const MAX_STATE_BYTES = 64 * 1024;
export const MAX_STATE_KEYS = 256;
/** bridge/state and availability: {"state":"online"} and little else. */
export const MAX_STATUS_BYTES = 1024;
/** The broker drops anything larger for this client (MQTT 5 Maximum Packet Size); the device list of a large network fits. */
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
