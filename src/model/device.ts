// The one device model. Every device, whatever its transport (Modbus through a profile,
// Zigbee through zigbee2mqtt, a GPIO line, a test's own class), is a `Device`: what it is
// (role, capabilities, ratings), what it reads (`Readable`), and the capabilities it
// offers as small interfaces, present only when it has them:
//   power     PowerControllable  a battery's charge or discharge power in W
//   curtail   Curtailable        a PV inverter's limit in % of its rating
//   switch    Switchable         a load switched off (a relay's coils, a plug, a GPIO output)
//   setpoint  Setpoint           a heating setpoint set back (a thermostat)
// and `capture` / `revert`: an opaque pre-state the dispatch ledger commits before the
// first write and hands back to put the device back. Only the device's own family reads
// what is inside it (registers and coils for Modbus, on/off for a plug, °C for a
// thermostat). Dispatch, the status page, device sync and the fleet program against this
// file and `devices/`, never against a transport (test/unit/import-graph.test.ts).
import { CAPABILITIES, type ActionName, type Capability } from "./vocabulary.js";
import type { Role } from "./roles.js";

/** A device's decoded readings by their wire names (B6: power_w, soc_pct, state, ...). */
export type Metrics = Record<string, number>;

/** 0 unknown, 1 local automatic, 2 under remote dispatch, 3 standby, 4 fault (B5). */
export type OpMode = 0 | 1 | 2 | 3 | 4;

export interface DeviceHealth {
  online: boolean;
  last_ok_at: string | null;
  last_error: string | null;
  consecutive_failures: number;
  op_mode: OpMode;
  /** Points the device does not have (exception 2, or silent while the rest answers), probed again hourly. */
  unavailable_points?: string[];
}

/** What a device is, as device sync (B5) publishes it and dispatch plans with it. */
export interface DeviceDescriptor {
  role: Role;
  /** The wire code device sync publishes for the role (roles.ts). */
  device_type: number;
  max_power_w?: number;
  /**
   * What pairing found the device offers (a profile's, or its role rule's, list). Device
   * sync and dispatch never read it: they take `capabilitiesOf(device)`, from the
   * interfaces the device implements, which a Modbus device offers only where this list
   * and its profile's actions agree.
   */
  capabilities: Capability[];
  /** Profile (or family) that speaks to it, e.g. "sunspec", "zigbee". */
  profile: string;
  /** Identity read while pairing (manufacturer, model, serial, ...). */
  identity: Record<string, string>;
}

/** The pre-event state of what an action touches: JSON, read only by the device's own family. */
export type PreState = unknown;

/** Readings and health: every device has them. */
export interface Readable {
  /** The latest value of every metric (empty before the first reading). */
  latest(): Metrics;
  health(): DeviceHealth;
}

// Closed loop (B4): every capability's write resolves only once the device shows it, and
// throws CONTROL_NOT_CONFIRMED when it does not follow. Dispatch counts nothing a write
// did not make true: a device that does not follow is `failed` for the event.

/** A battery inverter: charge or discharge at a power. */
export interface PowerControllable {
  /** Writes the setpoint; resolves once the device shows it (its mode read back, where its profile says how). */
  setPower(direction: "charge" | "discharge", watts: number): Promise<void>;
  /** ms between rewrites of an active setpoint (0: the device holds it). */
  readonly refreshMs: number;
  /** The directions it takes (absent: both). */
  readonly directions?: readonly ("charge" | "discharge")[];
  /**
   * Whether a reading shows the device in the forced mode of `direction`: false once it is
   * back on its own control (a revert timer ran out); undefined when its readings cannot tell.
   */
  showsForced?(direction: "charge" | "discharge", metrics: Metrics): boolean | undefined;
}

/** A PV inverter: cap its output at a percentage of its rating. */
export interface Curtailable {
  setLimit(pct: number): Promise<void>;
  readonly refreshMs: number;
}

/** A switched load: a shed switches it off; the ledger's release reverts it to how it was. */
export interface Switchable {
  /** Resolves once the device reads its outputs off (a relay's coils, a plug's state, a line's level). */
  switchOff(): Promise<void>;
  /** ms between rewrites while it is held off (0 or absent: the device holds it). */
  readonly refreshMs?: number;
  /** Which of its outputs are on, as a bit mask (output 0 = bit 0), when it has several and knows. */
  outputsOn?(): number | undefined;
}

/** A heating setpoint: a shed sets it back by `setback_c` from the setpoint held before the event. */
export interface Setpoint {
  readonly setback_c: number;
  /** Sets it back from the setpoint of `pre` (the ledger's pre-state): a retry never sets back twice. */
  setBack(pre: PreState): Promise<void>;
}

/** Where a device is and how it is rated: what the status page shows and dispatch plans with. */
export interface DeviceInfo {
  device_id: string;
  device_name?: string;
  /** The family that reaches it ("modbus", "zigbee", "gpio", ...). */
  family: string;
  /** Where it is reached, for the status page ("tcp://10.0.0.5:502 unit 1", "zigbee2mqtt/washer-plug"). */
  address: string;
  /** The load a shed of it removes when it has no metering of its own (W); per output for a relay. */
  rated_power_w?: number | readonly number[];
  shed_priority?: number;
  /** How long a request to it may wait for its answer (ms): with two poll intervals, when its reading is stale (B4). */
  answer_timeout_ms?: number;
  /** False after REGISTRY_WRITE_FAILED: read, but not dispatched nor listed in device sync. */
  fully_configured: boolean;
}

export interface Device extends Readable {
  readonly id: string;
  info(): DeviceInfo;
  /** What pairing (or the family) says it is; null while a Modbus device has not paired yet. */
  descriptor(): DeviceDescriptor | null;
  readonly power?: PowerControllable;
  readonly curtail?: Curtailable;
  readonly switch?: Switchable;
  readonly setpoint?: Setpoint;
  /**
   * The state of whatever `action` is about to change, merged into `held` (the pre-state
   * the ledger already holds): only what `held` lacks is read. Throws when it cannot be
   * read: a device whose state is unknown is not written.
   */
  capture(action: ActionName, held?: PreState): Promise<PreState>;
  /** Writes a captured pre-state back (the reverse of the order it was taken in). */
  revert(pre: PreState): Promise<void>;
  /** Reads the device back against `pre`: undefined when it holds it, else what differs. */
  verify(pre: PreState): Promise<string | undefined>;
  /**
   * Whether `pre` holds any state of this device to write back (a row an earlier release
   * made before anything was read holds none): only the device's family can tell. Absent:
   * any pre-state but null holds something.
   */
  holdsState?(pre: PreState): boolean;
  /** Hands the device back to its own control when no pre-state is held (a profile's `release` action); absent: nothing to do. */
  handBack?(): Promise<void>;
  /**
   * Reads the device once right after a write of any capability (its power, in the
   * control lane where it has a bus): the latest values take it at once. {} when it has
   * nothing to read; absent: its latest values stand.
   */
  confirm?(): Promise<Metrics>;
  /** Marks the device as under remote dispatch (op mode 2 while online). */
  setRemote(remote: boolean): void;
}

/** What implements the capability interfaces: a Device, or a test's stand-in for one. */
export type Capable = Pick<Device, "power" | "curtail" | "switch" | "setpoint">;

/** An action as the capability interface that carries it: its write, and how often it is rewritten. */
export interface Drive {
  /** ms between rewrites while the action holds (0: the device holds it). */
  readonly refreshMs: number;
  /** Writes the action's setting; `pre` is the pre-event state the ledger holds (a setpoint sets back from it). */
  write(setting: { watts?: number; pct?: number }, pre: PreState): Promise<void>;
}

/** Whether a battery's power interface takes `direction` (its `directions`; absent: both). */
export function takes(p: PowerControllable | undefined, direction: "charge" | "discharge"): p is PowerControllable {
  return p !== undefined && (p.directions?.includes(direction) ?? true);
}

function power(p: PowerControllable | undefined, direction: "charge" | "discharge"): Drive | undefined {
  if (!takes(p, direction)) return undefined;
  return { refreshMs: p.refreshMs, write: (s) => p.setPower(direction, s.watts ?? 0) };
}

/**
 * Every action a device can be driven with, each through the one interface that carries
 * it: the one table between actions and capabilities (a new action: its interface and a
 * row here). Absent: the device does not implement it.
 */
const DRIVES: { readonly [A in ActionName]?: (d: Capable) => Drive | undefined } = {
  charge: (d) => power(d.power, "charge"),
  discharge: (d) => power(d.power, "discharge"),
  curtail: ({ curtail: c }) => c && { refreshMs: c.refreshMs, write: (s) => c.setLimit(s.pct ?? 100) },
  shed: ({ switch: sw, setpoint: sp }) =>
    sw ? { refreshMs: sw.refreshMs ?? 0, write: () => sw.switchOff() } : sp && { refreshMs: 0, write: (_s, pre) => sp.setBack(pre) },
};

/** How the device carries `action`, or undefined when it implements no interface for it. */
export function driveOf(d: Capable, action: ActionName): Drive | undefined {
  return DRIVES[action]?.(d);
}

/** The capabilities a device's interfaces give it, in the wire's order (B5): what device sync publishes and dispatch plans with. */
export function capabilitiesOf(d: Capable): Capability[] {
  // What a shed changed, the ledger puts back: a device that sheds is one a restore event puts back.
  const sheds = driveOf(d, "shed") !== undefined;
  return CAPABILITIES.filter((c) => c === "telemetry" || (c === "restore" ? sheds : driveOf(d, c) !== undefined));
}

/** Every device of the site, whatever its family: the read side of the one registry (devices/). */
export interface DeviceDirectory {
  list(): readonly Device[];
  get(deviceId: string): Device | undefined;
  /** Goes up by one with every change of the list or of a device's descriptor: a cached view keys on it. */
  readonly version: number;
}
