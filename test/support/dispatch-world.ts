// A whole site in one process on an injected clock, for the property test of dispatch
// against the simulator's ground truth (docs/testing.md, "Dispatch against ground truth").
// The real dispatcher (executor, kinds, ledger, measurement) drives the real device layer:
// Modbus devices through DeviceDriver, the builtin profiles and a Bus whose transport hands
// each request PDU to the simulator's own PDU handler (hw-sim/modbus-pdu.ts); Zigbee plugs
// and thermostats through the gateway's zigbee2mqtt bridge, whose MQTT client is replaced
// by a direct line to the simulator's Zigbee device models. Everything the simulator knows
// is read from its models, never from what the gateway says.
//
// Ground truth: a second, untouched copy of the site (the shadow: same seed, same models,
// never written) runs on the same clock. A device's effect on grid import at any instant
// is its import contribution minus the shadow's; an event's true delivery is the effect of
// the devices it drives, in its share of each, averaged over its measured window.
import { DeviceDriver } from "../../src/modbus/device/driver.js";
import { SitegateError } from "../../src/errors.js";
import type { DriverPool } from "../../src/modbus/device/pool.js";
import type { Metrics } from "../../src/devices/types.js";
import type { DeviceSource, RegisteredDevice } from "../../src/modbus/device/types.js";
import { SiteDevices } from "../../src/devices/directory.js";
import { ModbusFamily } from "../../src/modbus/device/family.js";
import type { DeviceConfig } from "../../src/modbus/config-schema.js";
import { zigbeeSchema } from "../../src/zigbee/config-schema.js";
import { Dispatcher, type ExecutionResponse } from "../../src/dispatch/dispatcher.js";
import { DISPATCH_MIGRATIONS } from "../../src/dispatch/store.js";
import { dispatchRequest, type EventSpec } from "../../src/dispatch/request.js";
import { Bus } from "../../src/modbus/bus.js";
import type { Table } from "../../src/modbus/planner.js";
import type { Transport } from "../../src/modbus/transport.js";
import { builtinProfiles } from "../../src/profiles/registry.js";
import type { Profile } from "../../src/profiles/schema.js";
import { openDatabase, migrate, type Db } from "../../src/storage/db.js";
import { ZigbeeBridge as GatewayZigbee } from "../../src/zigbee/bridge.js";
import { silentLogger } from "../../src/log.js";
import { SiteModel } from "../../hw-sim/site-model.js";
import { PvInverter, StorageInverter, SunSpecMeter } from "../../hw-sim/models/sunspec-devices.js";
import { Relay } from "../../hw-sim/models/relay.js";
import { ZigbeeBridge as SimZigbee } from "../../hw-sim/zigbee.js";
import { buildBrandDevices } from "../../hw-sim/models/brands/index.js";
import { HybridInverter } from "../../hw-sim/models/brands/hybrid.js";
import { brandScenarioDevice, brandTruth, isBrandSpec, withoutPacing, type BrandBattery } from "./dispatch-world-brands.js";
import type { ZigbeePlug, ZigbeeThermostat, ZigbeeDevice as SimZigbeeDevice } from "../../hw-sim/zigbee-devices.js";
import { parseScenario, type Scenario, type ScenarioInput } from "../../hw-sim/scenario.js";
import { FakeClock } from "./fake-clock.js";
import type { Clock } from "../../src/util/clock.js";
import type { DeviceHealth } from "../../src/model/device.js";
import { DeviceSlot } from "../../hw-sim/faults.js";
import {
  FaultTimeline,
  HybridStorage,
  RELEASE_GRACE_S,
  WORLD_ANSWER_TIMEOUT_MS,
  type WorldFault,
  type WorldRestart,
  SilentHold,
  type WorldStep,
} from "./dispatch-world-faults.js";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

// ---- the scenario: what fast-check generates (dispatch-world-gen.ts) ----

export type EventKindName = "charge" | "discharge" | "shed" | "restore" | "pv_limit";

export interface WorldEvent {
  type: EventKindName;
  /** kW (0 for restore and pv_limit). */
  quantity_kw: number;
  /** Seconds after the world starts: when the request arrives (pv_limit: its start). */
  submit_s: number;
  start_s: number;
  duration_s: number;
  priority: number;
  mandatory: boolean;
  /** Seconds after the world starts: a cancellation (pv_limit: the input released). */
  cancel_s?: number;
  /** pv_limit only. */
  limit_pct?: number;
}

export interface WorldSpec {
  seed: number;
  base_load_w: number;
  load_noise_pct: number;
  irradiance: number;
  meter: boolean;
  /**
   * `hybrid`: covers the house load less PV while no forced mode is set (its own self-consumption).
   * `brand`: the brand's hybrid model driven through its brand profile instead of SunSpec
   * storage (dispatch-world-brands.ts), with its own PV array of `pv_max_w`; control_sf unused.
   */
  batteries: Array<{
    max_power_w: number;
    capacity_wh: number;
    soc_pct: number;
    control_sf: -2 | -1 | 0 | 1;
    hybrid?: boolean;
    brand?: BrandBattery;
    pv_max_w?: number;
  }>;
  pvs: Array<{ max_power_w: number; control_sf: -2 | -1 | 0 | 1 }>;
  relays: Array<{ load_per_coil_w: number; rating: "none" | "total" | "per_coil"; shed_priority?: number }>;
  plugs: Array<{ load_w: number; metering: boolean; rated: boolean; shed_priority?: number }>;
  /** Heating at the start (the room below its setpoint), so a setback stops the heater. */
  thermostats: Array<{ load_w: number; metering: boolean; setpoint_c: number; setback_c: number; shed_priority?: number }>;
  events: WorldEvent[];
  /** Device faults over the world (the simulator's own, hw-sim/faults.ts). */
  faults?: WorldFault[];
  /** The gateway stops and starts again (a crash, or a clean stop). */
  restarts?: WorldRestart[];
  /** House-load steps and PV clouds. */
  steps?: WorldStep[];
}

export const WORLD_T0 = Date.UTC(2026, 10, 22, 12, 0, 0);
/** After the last event ends: time for every release to land and be checked. */
export const SETTLE_S = 10;
const POLL_MS = 1000;
/** A device not driven by any event for this many samples must read back its pre-event state. */
const RELEASE_SAMPLES = 3;
const ZIGBEE_BASE = "zigbee2mqtt";

export function eventId(i: number): string {
  return `00000000-0000-4000-8000-${(i + 1).toString(16).padStart(12, "0")}`;
}

/** The simulator scenario of a world (also what the end-to-end runs start the real simulator with). */
export function scenarioOf(w: WorldSpec, opts: { listen?: string; control?: string; broker?: string } = {}): ScenarioInput {
  const devices: NonNullable<ScenarioInput["ports"]>[number]["devices"] = [];
  let unit = 1;
  // A brand hybrid's own self-consumption covers an equal share of the house load with the other hybrids.
  const sharePct = 100 / Math.max(1, w.batteries.filter((b) => b.hybrid).length);
  w.batteries.forEach(({ hybrid: _hybrid, brand, pv_max_w: _pv, ...b }, i) =>
    devices.push(
      brand
        ? brandScenarioDevice({ ...w.batteries[i]!, brand }, `bat${i + 1}`, unit++, sharePct)
        : { unit: unit++, model: "sunspec-storage", name: `bat${i + 1}`, ...b, control_sf: b.control_sf },
    ),
  );
  w.pvs.forEach((p, i) => devices.push({ unit: unit++, model: "sunspec-pv", name: `pv${i + 1}`, ...p }));
  if (w.meter) devices.push({ unit: unit++, model: "sunspec-meter", name: "grid" });
  w.relays.forEach((r, i) =>
    devices.push({ unit: unit++, model: "relay", name: `relay${i + 1}`, coils: 4, load_per_coil_w: r.load_per_coil_w }),
  );
  // A port needs a device: a meter the gateway is not told about stands in.
  if (devices.length === 0) devices.push({ unit: 200, model: "sunspec-meter", name: "unused" });
  const zigbee = [
    ...w.plugs.map((p, i) => ({ friendly_name: `plug${i + 1}`, kind: "plug" as const, metering: p.metering, load_w: p.load_w })),
    ...w.thermostats.map((t, i) => ({
      friendly_name: `tstat${i + 1}`,
      kind: "thermostat" as const,
      metering: t.metering,
      load_w: t.load_w,
      setpoint_c: t.setpoint_c,
      room_c: t.setpoint_c - 0.5,
      ambient_c: 12,
    })),
  ];
  return {
    seed: w.seed,
    control: { listen: opts.control ?? "127.0.0.1:0" },
    site: { base_load_w: w.base_load_w, load_noise_pct: w.load_noise_pct, pv_irradiance: w.irradiance },
    ports: [{ kind: "tcp", listen: opts.listen ?? "127.0.0.1:0", devices }],
    ...(zigbee.length ? { zigbee: { broker: opts.broker ?? "mqtt://127.0.0.1:1883", base_topic: ZIGBEE_BASE, devices: zigbee } } : {}),
  };
}

/** The configure request's mb_device_type of each simulated model. */
const MB_DEVICE_TYPE: Record<string, 1 | 2 | 3 | 99> = { "sunspec-meter": 1, "sunspec-pv": 2, "sunspec-storage": 3 };

/** The gateway's device entries for a world: Modbus (one TCP endpoint) and Zigbee. */
export function gatewayDevices(
  w: WorldSpec,
  host: string,
  port: number,
  org = "sim",
): { modbus: DeviceConfig[]; zigbee: Array<Record<string, unknown>> } {
  const modbus: DeviceConfig[] = [];
  const sc = parseScenario(scenarioOf(w));
  for (const d of sc.ports[0].devices) {
    if (d.name === "unused") continue;
    const relay = d.model === "relay" ? w.relays[Number(d.name.slice(5)) - 1] : undefined;
    // A brand whose profile reads no rating from the device (Deye) is rated by the installer.
    const rated =
      isBrandSpec(d) && !profile(d.model).max_power
        ? d.max_power_w
        : relay?.rating === "total"
          ? 4 * relay.load_per_coil_w
          : relay?.rating === "per_coil"
            ? [1, 2, 3, 4].map(() => relay.load_per_coil_w)
            : undefined;
    modbus.push({
      device_id: d.name,
      device_type: "modbus",
      device_integration: `${org}/${d.model === "relay" ? "relay-coils" : isBrandSpec(d) ? d.model : "sunspec"}`,
      mb_device_type: isBrandSpec(d) ? 3 : (MB_DEVICE_TYPE[d.model] ?? 99),
      mb_type: 2,
      mb_ip: host,
      mb_port: port,
      mb_slave_id: d.unit,
      ...(rated !== undefined ? { rated_power_w: rated } : {}),
      ...(relay?.shed_priority !== undefined ? { shed_priority: relay.shed_priority } : {}),
    } as DeviceConfig);
  }
  const zigbee = [
    ...w.plugs.map((p, i) => ({
      device_id: `plug${i + 1}`,
      friendly_name: `plug${i + 1}`,
      device_type: 30,
      ...(p.rated ? { rated_power_w: p.load_w } : {}),
      ...(p.shed_priority !== undefined ? { shed_priority: p.shed_priority } : {}),
    })),
    ...w.thermostats.map((t, i) => ({
      device_id: `tstat${i + 1}`,
      friendly_name: `tstat${i + 1}`,
      device_type: 31,
      rated_power_w: t.load_w,
      setback_c: t.setback_c,
      ...(t.shed_priority !== undefined ? { shed_priority: t.shed_priority } : {}),
    })),
  ];
  return { modbus, zigbee };
}

// ---- the simulator's side ----

type Kind = "battery" | "pv" | "meter" | "relay" | "plug" | "thermostat";

/** One device of the simulated site and its shadow twin. */
interface SimPair {
  id: string;
  kind: Kind;
  max_power_w?: number;
  /** Import contribution now (W): a load's draw, minus a source's output. */
  actual(): number;
  shadow(): number;
  /**
   * What an event on it delivers now, as import contribution (W), when that is not
   * actual - shadow: a battery's delivery is its own AC power (B4), also for a hybrid
   * whose undriven twin self-consumes.
   */
  own?(): number;
  /** Its control state, to compare with the state before any event. */
  state(): string;
}

/** The simulated site: its models, the shadow copy, and the units on the Modbus port. */
class SimSite {
  readonly site: SiteModel;
  readonly shadowSite: SiteModel;
  /** The real site's devices by unit, each behind the simulator's fault decisions. */
  readonly units = new Map<number, DeviceSlot>();
  /** The same slots by device name. */
  readonly slots = new Map<string, DeviceSlot>();
  readonly pairs: SimPair[] = [];
  readonly zigbee?: SimZigbee;
  private readonly shadowZigbee?: SimZigbee;

  constructor(
    readonly scenario: Scenario,
    now: () => number,
    hybrids: ReadonlySet<string> = new Set(),
    /** All hybrids of the site, the brand ones (their own self-consumption) included. */
    hybridCount = hybrids.size,
  ) {
    this.site = new SiteModel(scenario.site, scenario.seed, now);
    this.shadowSite = new SiteModel(scenario.site, scenario.seed, now);
    const log = silentLogger();
    const realPv: PvInverter[] = [];
    const twinPv: PvInverter[] = [];
    // Each hybrid covers an equal share of the house load less the PV output.
    const deficit = (site: SiteModel, pvs: PvInverter[]) => () =>
      (site.baseLoadW() - pvs.reduce((a, p) => a + p.acPowerW(), 0)) / Math.max(1, hybridCount);
    for (const spec of scenario.ports[0].devices) {
      const hybrid = hybrids.has(spec.name);
      const [real, ...moreUnits] = buildModbus(spec, this.site, hybrid ? deficit(this.site, realPv) : undefined);
      const [twin] = buildModbus(spec, this.shadowSite, hybrid ? deficit(this.shadowSite, twinPv) : undefined);
      if (real instanceof PvInverter) realPv.push(real);
      if (twin instanceof PvInverter) twinPv.push(twin as PvInverter);
      const slot = new DeviceSlot(real!);
      this.units.set(spec.unit, slot);
      this.slots.set(spec.name, slot);
      for (const m of moreUnits) this.units.set(m.unit, new DeviceSlot(m));
      if (spec.name !== "unused") this.pairs.push(modbusPair(spec.name, real!, twin!, isBrandSpec(spec) ? spec.model : undefined));
    }
    if (scenario.zigbee) {
      this.zigbee = new SimZigbee(scenario.zigbee, this.site, log, ".");
      this.shadowZigbee = new SimZigbee(scenario.zigbee, this.shadowSite, log, ".");
      for (const [name, d] of this.zigbee.devices) this.pairs.push(zigbeePair(name, d, this.shadowZigbee.devices.get(name)!));
    }
  }

  advance(): void {
    this.site.advance();
    this.shadowSite.advance();
  }

  /** A house-load step or a cloud, on the site and its shadow alike. */
  step(s: WorldStep): void {
    for (const site of [this.site, this.shadowSite]) {
      site.advance();
      if (s.load_delta_w !== undefined) site.base_load_w = Math.max(0, site.base_load_w + s.load_delta_w);
      if (s.irradiance !== undefined) site.pv_irradiance = s.irradiance;
      site.advance();
    }
  }
}

type ModbusModel = StorageInverter | PvInverter | SunSpecMeter | Relay | HybridInverter;

/** A scenario device's models: one, or one per unit id it answers on. */
function buildModbus(spec: Scenario["ports"][number]["devices"][number], site: SiteModel, hybridDeficit?: () => number): ModbusModel[] {
  switch (spec.model) {
    case "sunspec-storage":
      return [hybridDeficit ? new HybridStorage(spec, site, hybridDeficit) : new StorageInverter(spec, site)];
    case "sunspec-pv":
      return [new PvInverter(spec, site)];
    case "sunspec-meter":
      return [new SunSpecMeter(spec, site)];
    case "relay":
      return [new Relay(spec, site)];
    default:
      if (isBrandSpec(spec)) return buildBrandDevices(spec, site) as ModbusModel[];
      throw new Error(`the world has no ${spec.model}`);
  }
}

/** `profile`: the brand profile that drives a brand battery. */
export function modbusPair(id: string, real: ModbusModel, twin: ModbusModel, profile?: string): SimPair {
  if (real instanceof HybridInverter) {
    const truth = brandTruth(real, profile ?? "");
    return { id, kind: "battery", ...truth, shadow: () => -(twin as HybridInverter).acPowerW() };
  }
  if (real instanceof StorageInverter) {
    const t = twin as StorageInverter;
    return {
      id,
      kind: "battery",
      max_power_w: real.maxW,
      actual: () => -real.acPowerW(),
      shadow: () => -t.acPowerW(),
      // Without a forced mode (StorCtl_Mod 0) a battery is on its own (a hybrid self-consumes): none of it is an event's.
      own: () => (real.ctl === 0 ? 0 : -real.acPowerW()),
      state: () => `mode ${real.ctl} in ${real.inRte} out ${real.outRte} revert ${real.rvrtS} conn ${real.ctl123.conn}`,
    };
  }
  if (real instanceof PvInverter) {
    const t = twin as PvInverter;
    const c = real.ctl123;
    return {
      id,
      kind: "pv",
      max_power_w: real.maxW,
      actual: () => -real.acPowerW(),
      shadow: () => -t.acPowerW(),
      state: () => `conn ${c.conn} limit ${c.limEna ? `${c.limPct} %` : "off"} revert ${c.limRvrtS}`,
    };
  }
  if (real instanceof Relay) {
    const t = twin as Relay;
    return {
      id,
      kind: "relay",
      actual: () => real.loadW(),
      shadow: () => t.loadW(),
      state: () => `coils ${real.coils.map((x) => (x ? 1 : 0)).join("")}`,
    };
  }
  return { id, kind: "meter", actual: () => 0, shadow: () => 0, state: () => "meter" };
}

function zigbeePair(id: string, real: SimZigbeeDevice, twin: SimZigbeeDevice): SimPair {
  if (real.kind === "plug") {
    const p = real as ZigbeePlug;
    return { id, kind: "plug", actual: () => real.loadW(), shadow: () => twin.loadW(), state: () => `on ${p.on}` };
  }
  const th = real as ZigbeeThermostat;
  return {
    id,
    kind: "thermostat",
    actual: () => real.loadW(),
    shadow: () => twin.loadW(),
    state: () => `setpoint ${th.setpointC} mode ${th.systemMode}`,
  };
}

/** A Modbus write the simulator refused (a value out of the device's range). */
export interface RefusedWrite {
  at: number;
  unit: number;
  fn: number;
  address: number;
  values: number[];
  exception: number;
}

/**
 * The smallest real seam: each request PDU goes to the simulator's fault decision and PDU
 * handler of its unit (hw-sim/faults.ts, as the TCP and RTU servers use them). No answer,
 * or one later than the answer timeout, is a timeout; a late write was applied all the same.
 */
class SimTransport implements Transport {
  readonly isOpen = true;
  readonly refused: RefusedWrite[] = [];

  constructor(
    private readonly units: ReadonlyMap<number, DeviceSlot>,
    private readonly now: () => number,
  ) {}

  async open(): Promise<void> {}
  async close(): Promise<void> {}

  private call(unit: number, pdu: Buffer, write?: { address: number; values: number[] }): Buffer {
    const slot = this.units.get(unit);
    const timedOut = () => Object.assign(new Error("Timed out"), { errno: "ETIMEDOUT" });
    if (!slot) throw timedOut();
    const d = slot.decide(pdu);
    if (d.kind === "silent" || (d.kind === "reply" && d.delayMs >= WORLD_ANSWER_TIMEOUT_MS)) throw timedOut();
    if (d.kind === "drop") throw Object.assign(new Error("Port Not Open"), { errno: "ECONNRESET" });
    const out = d.pdu;
    if (out[0]! & 0x80) {
      // A value out of the device's range; a refusal the world's faults asked for is not the gateway's.
      if (write && slot.faults.size === 0) this.refused.push({ at: this.now(), unit, fn: pdu[0]!, ...write, exception: out[1]! });
      throw Object.assign(new Error(`Modbus exception ${out[1]}`), { modbusCode: out[1] });
    }
    return out;
  }

  async read(unit: number, table: Table, address: number, count: number): Promise<number[]> {
    const fn = { coil: 1, discrete: 2, holding: 3, input: 4 }[table];
    const out = this.call(unit, header(fn, address, count));
    if (fn <= 2) return Array.from({ length: count }, (_, i) => (out[2 + (i >> 3)] >> (i & 7)) & 1);
    return Array.from({ length: count }, (_, i) => out.readUInt16BE(2 + 2 * i));
  }

  async writeRegisters(
    unit: number,
    address: number,
    values: number[],
    _t: number,
    fn: 6 | 16 = values.length === 1 ? 6 : 16,
  ): Promise<void> {
    if (fn === 6) {
      this.call(unit, header(6, address, values[0] & 0xffff), { address, values });
      return;
    }
    const pdu = Buffer.alloc(6 + 2 * values.length);
    header(16, address, values.length).copy(pdu);
    pdu[5] = 2 * values.length;
    values.forEach((v, i) => pdu.writeUInt16BE(v & 0xffff, 6 + 2 * i));
    this.call(unit, pdu, { address, values });
  }

  async writeCoils(unit: number, address: number, values: boolean[]): Promise<void> {
    const bytes = Math.ceil(values.length / 8);
    const pdu = Buffer.alloc(6 + bytes);
    header(15, address, values.length).copy(pdu);
    pdu[5] = bytes;
    values.forEach((v, i) => {
      if (v) pdu[6 + (i >> 3)] |= 1 << (i & 7);
    });
    this.call(unit, pdu, { address, values: values.map((v) => (v ? 1 : 0)) });
  }
}

function header(fn: number, a: number, b: number): Buffer {
  const p = Buffer.alloc(5);
  p[0] = fn;
  p.writeUInt16BE(a, 1);
  p.writeUInt16BE(b, 3);
  return p;
}

/**
 * The gateway's zigbee2mqtt bridge on a direct line to the simulated Zigbee devices: what
 * it publishes to `{name}/set` or `/get` is applied to the device model, and the device's
 * state message comes back at once, as zigbee2mqtt would publish it.
 */
class ZigbeeLine {
  private readonly gw: {
    client: unknown;
    connected: boolean;
    onMessage(topic: string, text: string): void;
  };
  private readonly lastReport = new Map<string, number>();

  constructor(
    bridge: GatewayZigbee,
    private readonly sim: SimZigbee,
    private readonly now: () => number,
  ) {
    this.gw = bridge as unknown as ZigbeeLine["gw"];
    if (typeof this.gw.onMessage !== "function")
      throw new Error("the gateway's ZigbeeBridge has no onMessage(topic, text) any more: update ZigbeeLine");
    this.gw.client = {
      subscribe: (_t: unknown, _o: unknown, cb?: (err: Error | null) => void) => cb?.(null),
      unsubscribe: () => undefined,
      publishAsync: async (topic: string, text: string) => this.fromGateway(topic, text),
      endAsync: async () => undefined,
    };
    this.gw.connected = true;
    this.deliver("bridge/state", { state: "online" });
    this.deliver("bridge/devices", sim.deviceList());
    for (const d of sim.devices.values()) this.deliver(`${d.name}/availability`, { state: "online" });
  }

  private deliver(sub: string, body: unknown): void {
    this.gw.onMessage(`${ZIGBEE_BASE}/${sub}`, JSON.stringify(body));
  }

  private report(d: SimZigbeeDevice): void {
    d.dirty = false;
    this.lastReport.set(d.name, this.now());
    this.deliver(d.name, d.stateMessage());
  }

  private fromGateway(topic: string, text: string): void {
    const m = new RegExp(`^${ZIGBEE_BASE}/(.+)/(set|get)$`).exec(topic);
    const d = m ? this.sim.devices.get(m[1]) : undefined;
    if (!m || !d) return;
    if (m[2] === "set" && d.apply(JSON.parse(text) as Record<string, unknown>).changed.length === 0) return;
    this.report(d);
  }

  /** zigbee2mqtt's reports: on a change, and every device's report interval. */
  tick(): void {
    const now = this.now();
    for (const d of this.sim.devices.values())
      if (d.dirty || now - (this.lastReport.get(d.name) ?? -Infinity) >= d.reportIntervalMs) this.report(d);
  }
}

// ---- the gateway's side ----

let profiles: ReturnType<typeof builtinProfiles> | null = null;
function profile(name: string): Profile {
  profiles ??= builtinProfiles();
  return withoutPacing(profiles.get(name));
}

/**
 * One run of the gateway's clock: its timers go to the world's clock until the run ends; a
 * crash ends it at once (no timer of that run fires again, nothing is put back).
 */
class RunClock implements Clock {
  private readonly ids = new Set<unknown>();
  dead = false;
  /** Timers due at once set at this monotonic instant: a dispatcher that re-arms one without end is a busy loop. */
  private atOnce = { mono: -1, n: 0 };

  constructor(
    private readonly clock: FakeClock,
    private readonly onBusyLoop: () => void = () => undefined,
  ) {}

  now(): number {
    return this.clock.now();
  }
  mono(): number {
    return this.clock.mono();
  }
  setTimer(fn: () => void, ms: number): unknown {
    if (this.dead) return null;
    if (ms <= 0) {
      const mono = this.clock.mono();
      this.atOnce = this.atOnce.mono === mono ? { mono, n: this.atOnce.n + 1 } : { mono, n: 1 };
      // On a real clock this spins the CPU; here it would never let the clock move. Reported, then slowed to a poll.
      if (this.atOnce.n > BUSY_LOOP_TIMERS) {
        this.onBusyLoop();
        ms = POLL_MS;
      }
    }
    const id = this.clock.setTimer(() => {
      this.ids.delete(id);
      if (!this.dead) fn();
    }, ms);
    this.ids.add(id);
    return id;
  }
  clearTimer(h: unknown): void {
    this.clock.clearTimer(h);
    this.ids.delete(h);
  }
  kill(): void {
    this.dead = true;
    for (const id of this.ids) this.clock.clearTimer(id);
    this.ids.clear();
  }
}

interface Gateway {
  dispatcher: Dispatcher;
  /** The clock of the dispatcher's current run. */
  run: RunClock;
  drivers: Map<string, DeviceDriver>;
  latest: Map<string, Metrics>;
  health: Map<string, DeviceHealth>;
  local: SiteDevices;
  zigbee?: ZigbeeLine;
  transport: SimTransport;
  /** A new dispatcher on the same database and devices (a restart). */
  restart(): Dispatcher;
}

/** Timers due at once, set at one instant, beyond which the dispatcher is in a busy loop. */
const BUSY_LOOP_TIMERS = 200;

const HEALTHY: DeviceHealth = { online: true, last_ok_at: null, last_error: null, consecutive_failures: 0, op_mode: 1 };

async function buildGateway(
  w: WorldSpec,
  sim: SimSite,
  clock: FakeClock,
  db: Db,
  responses: ExecutionResponse[],
  fail: Fail,
): Promise<Gateway> {
  const transport = new SimTransport(sim.units, () => clock.now());
  const bus = new Bus({ kind: "tcp", host: "sim", port: 502 }, silentLogger(), transport);
  const cfg = gatewayDevices(w, "sim", 502);
  const drivers = new Map<string, DeviceDriver>();
  const registered: RegisteredDevice[] = [];
  for (const c of cfg.modbus) {
    const driver = new DeviceDriver(bus, c.mb_slave_id, profile(c.device_integration.split("/")[1]));
    const descriptor = await driver.pair();
    drivers.set(c.device_id, driver);
    registered.push({ config: c, descriptor, fully_configured: true, updated_at: new Date(clock.now()).toISOString() });
  }
  const source: DeviceSource & { version: number } = {
    version: 0,
    list: () => registered,
    get: (id) => registered.find((r) => r.config.device_id === id),
  };
  const latest = new Map<string, Metrics>();
  const health = new Map<string, DeviceHealth>();
  const telemetry = {
    health: (id: string) => health.get(id) ?? HEALTHY,
    latest: (id: string) => latest.get(id),
    confirm: (id: string, m: Metrics) => latest.set(id, { ...latest.get(id), ...m }),
    setRemote: () => undefined,
  };
  const pool: Pick<DriverPool, "driverFor"> = { driverFor: (c) => drivers.get(c.device_id)! };
  const local = new SiteDevices([new ModbusFamily(source, pool, telemetry)]);
  let zigbee: ZigbeeLine | undefined;
  if (sim.zigbee) {
    const bridge = new GatewayZigbee(zigbeeSchema.parse({ url: "mqtt://127.0.0.1:1", devices: cfg.zigbee }), silentLogger());
    local.add(bridge);
    zigbee = new ZigbeeLine(bridge, sim.zigbee, () => clock.now());
  }
  const gw: Gateway = {
    dispatcher: null as unknown as Dispatcher,
    run: new RunClock(clock),
    drivers,
    latest,
    health,
    local,
    zigbee,
    transport,
    restart() {
      // The gateway's readings are in memory: a restart starts without them, until its first poll or read.
      latest.clear();
      health.clear();
      const run = new RunClock(clock, () =>
        fail("busy_loop", `t=${(clock.now() - WORLD_T0) / 1000}s the dispatcher set over ${BUSY_LOOP_TIMERS} timers due at once`),
      );
      gw.run = run;
      gw.dispatcher = new Dispatcher({
        db: () => db,
        devices: local,
        clock: run,
        log: silentLogger(),
        pollIntervalMs: POLL_MS,
        // A run that crashed sends nothing more.
        respond: (_s, body) => {
          if (!run.dead) responses.push(body);
        },
      });
      return gw.dispatcher;
    },
  };
  gw.restart();
  return gw;
}

/** The executor's live claims of its last plan: device -> events with their watts. */
export function claimsOf(d: Dispatcher): ReadonlyMap<string, ReadonlyArray<{ event_id: string; watts: number }>> {
  const claims = (d as unknown as { exec?: { claims?: unknown } }).exec?.claims;
  if (!(claims instanceof Map))
    throw new Error("the dispatcher's executor no longer keeps its live claims in exec.claims: update claimsOf()");
  return claims as ReadonlyMap<string, ReadonlyArray<{ event_id: string; watts: number }>>;
}

// The database lives in memory-backed /dev/shm where there is one: every commit of the
// dispatcher is an fsync (synchronous=FULL), which on a disk costs more than the rest of a world.
const flush = () => new Promise<void>((r) => setImmediate(r));

// ---- running a world ----

export type Invariant =
  | "shed_raises_import"
  | "delivered_vs_truth"
  | "pre_state"
  | "thresholds"
  | "limits"
  | "one_response"
  | "released_after_faults"
  | "credit_unchanged"
  | "busy_loop";
export const INVARIANTS: readonly Invariant[] = [
  "shed_raises_import",
  "delivered_vs_truth",
  "pre_state",
  "thresholds",
  "limits",
  "one_response",
  // No device driven once no event drives it and its faults have cleared (within the
  // release backoff's 60 s cap plus two polls); no credit for a device whose state never changed.
  "released_after_faults",
  "credit_unchanged",
  // The dispatcher never re-arms a timer due at once without end (a busy loop on a real clock).
  "busy_loop",
];

export interface Violation {
  invariant: Invariant;
  message: string;
}

export interface EventOutcome {
  index: number;
  event_id: string;
  type: EventKindName;
  requested_w: number;
  /** What the response says (W), when there is one. */
  reported_w?: number;
  /** The simulator's truth over the event's measured window (W). */
  truth_w?: number;
  /** Whether the reported delivery was held against the truth (a shed only where the gateway can know it). */
  judged?: boolean;
  response?: ExecutionResponse;
}

export interface WorldReport {
  events: EventOutcome[];
  responses: ExecutionResponse[];
  violations: Violation[];
  /** The largest |reported - truth| of any event held against the truth, W, and whose. */
  worstError: { w: number; event?: EventOutcome };
  /** Simulated seconds. */
  simulated_s: number;
}

export interface Running {
  index: number;
  ev: WorldEvent;
  id: string;
  from_ms: number;
  until_ms: number;
  /** Truth samples: time and the event's effect (W, in its direction). */
  samples: Array<[number, number]>;
  cancelledBeforeStart: boolean;
  submitted: boolean;
}

/**
 * The second a request sent at second `t` reaches the gateway: at once, or when the gateway
 * is up again after a restart (the partner retries what it could not deliver).
 */
export function arrivalOf(w: WorldSpec, t: number): number {
  for (const r of w.restarts ?? []) if (t >= r.at_s && t < r.at_s + r.down_s) return r.at_s + r.down_s;
  return t;
}

/** The events of a world with the windows their delivery is measured over, for a world that starts at `t0`. */
export function trackEvents(w: WorldSpec, t0: number): Running[] {
  return w.events.map((ev, index) => {
    // A cancellation held by a restart takes effect when it arrives (or never, once the event is over).
    const cancel = ev.cancel_s === undefined || ev.type === "pv_limit" ? ev.cancel_s : arrivalOf(w, ev.cancel_s);
    return {
      index,
      ev,
      id: eventId(index),
      from_ms: t0 + Math.max(ev.start_s, arrivalOf(w, ev.submit_s)) * 1000,
      until_ms: t0 + Math.min(ev.start_s + ev.duration_s, cancel ?? Infinity) * 1000,
      // A cancellation in the second the event starts comes after its start (the start timer fires first).
      cancelledBeforeStart: cancel !== undefined && cancel < ev.start_s,
      samples: [],
      submitted: false,
    };
  });
}

/**
 * Seconds a world runs: until its last event ends, and the devices are put back and
 * checked; with faults, until the release backoff has had its cap after the last one
 * cleared; with restarts, until the gateway has been up again for the settle time.
 */
export function horizonOf(w: WorldSpec, settle_s = SETTLE_S): number {
  const events = Math.max(0, ...w.events.map((e) => e.start_s + e.duration_s)) + settle_s;
  const faults = w.faults?.length ? new FaultTimeline(w.faults).lastClear + RELEASE_GRACE_S + 3 : 0;
  const restarts = Math.max(0, ...(w.restarts ?? []).map((r) => r.at_s + r.down_s + settle_s));
  return Math.max(events, faults, restarts);
}

/** Runs one world to its end and checks every invariant; never throws for a violation. */
export async function runWorld(w: WorldSpec): Promise<WorldReport> {
  const clock = new FakeClock(WORLD_T0);
  const sc = parseScenario(scenarioOf(w));
  // A brand hybrid is one by its own model's self-consumption, not the world's deficit wrapper.
  const hybrids = new Set(w.batteries.flatMap((b, i) => (b.hybrid && !b.brand ? [`bat${i + 1}`] : [])));
  const sim = new SimSite(sc, () => clock.now(), hybrids, w.batteries.filter((b) => b.hybrid).length);
  const faults = new FaultTimeline(w.faults ?? []);
  const dir = mkdtempSync(join(existsSync("/dev/shm") ? "/dev/shm" : tmpdir(), "sitegate-world-"));
  const db = openDatabase(dir);
  migrate(db, [DISPATCH_MIGRATIONS]);
  const responses: ExecutionResponse[] = [];
  const violations: Violation[] = [];
  const fail = (invariant: Invariant, message: string) => {
    if (violations.filter((v) => v.invariant === invariant).length < 5) violations.push({ invariant, message });
  };
  let gw: Gateway | undefined;
  let up = true;
  try {
    gw = await buildGateway(w, sim, clock, db, responses, fail);
    void gw.dispatcher.start();
    const initial = new Map(sim.pairs.map((p) => [p.id, p.state()]));
    const events = trackEvents(w, WORLD_T0);
    const horizon = horizonOf(w);
    const released: ReleaseWatch = { unclaimed: new Map(), faults, initial };
    /** Per device, the seconds at which it read other than before any event. */
    const changed = new Map<string, number[]>();
    /** The claims while the gateway is down: a crashed run's devices hold what they were told; a clean stop put them back. */
    let downClaims: ReturnType<typeof claimsOf> = new Map();
    /** What arrived while the gateway was down: the partner retries it once it is up again. */
    let deferred: number[] = [];
    /** Devices gone silent still in the state an event drove them to: physically that event's, for the hold time. */
    const silentHold = new SilentHold(faults);
    for (let t = 1; t <= horizon; t++) {
      clock.advance(POLL_MS);
      await flush();
      faults.apply(t, sim.slots);
      for (const s of w.steps ?? []) if (s.at_s === t) sim.step(s);
      for (const r of w.restarts ?? []) {
        if (r.at_s === t && up) {
          up = false;
          downClaims = r.crash ? new Map(claimsOf(gw.dispatcher)) : new Map();
          if (r.crash) gw.run.kill();
          else await stopWithin(gw.dispatcher, gw.run);
        }
        if (r.at_s + r.down_s === t && !up) {
          up = true;
          void gw.restart().start();
          await flush();
          for (const at of deferred) for (const e of events) act(gw.dispatcher, e, at, clock.now(), true);
          deferred = [];
          await flush();
        }
      }
      if (events.some((e) => [e.ev.submit_s, e.ev.start_s, e.ev.cancel_s].includes(t))) {
        if (!up) deferred.push(t);
        else for (const e of events) act(gw.dispatcher, e, t, clock.now());
        await flush();
      }
      sim.advance();
      gw.zigbee?.tick();
      if (up) await poll(gw, clock.now());
      await flush();
      const claims = up ? claimsOf(gw.dispatcher) : downClaims;
      const driven = (id: string) => sim.pairs.find((p) => p.id === id)?.state() !== initial.get(id);
      sample(sim, events, silentHold.claims(claims, t, driven), clock.now(), fail, t);
      checkLimits(sim, claims, fail, t);
      checkReleased(sim, released, claims, fail, t);
      for (const p of sim.pairs)
        if (p.state() !== initial.get(p.id)) {
          let ts = changed.get(p.id);
          if (!ts) changed.set(p.id, (ts = []));
          ts.push(t);
        }
    }
    for (const p of sim.pairs)
      if (p.state() !== initial.get(p.id))
        fail("pre_state", `${p.id} at the end reads "${p.state()}", before any event "${initial.get(p.id)}"`);
    for (const r of gw.transport.refused)
      fail(
        "limits",
        `t=${(r.at - WORLD_T0) / 1000}s unit ${r.unit} refused fn ${r.fn} at ${r.address} = ${r.values.join(",")} (exception ${r.exception})`,
      );
    const outcomes = events.map((e) => outcome(w, e, responses, fail));
    for (const o of outcomes) checkCredit(o, events[o.index]!, changed, fail);
    let worst: WorldReport["worstError"] = { w: 0 };
    for (const o of outcomes)
      if (o.judged && o.reported_w !== undefined && o.truth_w !== undefined && Math.abs(o.reported_w - o.truth_w) > worst.w)
        worst = { w: Math.abs(o.reported_w - o.truth_w), event: o };
    return { events: outcomes, responses, violations, worstError: worst, simulated_s: horizon };
  } finally {
    if (gw && up) await stopQuietly(gw.dispatcher, clock);
    db.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A clean stop of the gateway within the world's second (no clock advance): what it cannot finish by then is a crash. */
async function stopWithin(d: Dispatcher, run: RunClock): Promise<void> {
  let done = false;
  const stopping = d.stop().then(() => (done = true));
  for (let i = 0; i < 50 && !done; i++) await flush();
  if (!done) run.kill();
  void stopping;
}

/**
 * No credit for a device whose state never changed: a device an event's response lists
 * with delivered power must have read other than before any event at some second of
 * that event's window (a relay whose coils never switched, a battery that ignored its mode).
 */
function checkCredit(o: EventOutcome, e: Running, changed: ReadonlyMap<string, number[]>, fail: Fail): void {
  const devs = (o.response?.details as { devices?: Array<{ device_id: string; delivered_w: number }> } | undefined)?.devices ?? [];
  const untilMs = Math.min(e.until_ms, o.response ? Date.parse(o.response.timestamp) : e.until_ms);
  // An event that ran under a second (cancelled the moment it started) has no second to look at.
  if (!e.samples.some(([at]) => at < untilMs)) return;
  const from = (e.from_ms - WORLD_T0) / 1000;
  const until = (untilMs - WORLD_T0) / 1000;
  for (const d of devs) {
    if (d.delivered_w <= 50) continue;
    const ts = changed.get(d.device_id) ?? [];
    if (!ts.some((t) => t >= from && t <= until + 1))
      fail(
        "credit_unchanged",
        `event #${e.index} (${e.ev.type}) credits ${d.device_id} with ${Math.round(d.delivered_w)} W, but its state never changed in the window`,
      );
  }
}

async function stopQuietly(d: Dispatcher, clock: FakeClock): Promise<void> {
  const stopping = d.stop();
  for (let i = 0; i < 20; i++) {
    await flush();
    clock.advance(1000);
  }
  await stopping;
}

/** What happens at second t: the request arrives, is cancelled; a pv_limit input goes active or is released. */
function act(d: Dispatcher, e: Running, t: number, now: number, late = false): void {
  const ev = e.ev;
  const end_ms = WORLD_T0 + (ev.start_s + ev.duration_s) * 1000;
  // Held while the gateway was down: an event that is over by now is not sent at all (nor its cancellation, nor its input).
  if (late && end_ms <= now) return;
  if (ev.type === "pv_limit") {
    if (t === ev.start_s) d.submitLocal(localSpec(e, now));
    if (t === ev.cancel_s) d.endLocal(`input:pv-limit-${e.index}`, "input released");
    return;
  }
  if (t === ev.submit_s) {
    d.submit(request(e, false));
    e.submitted = true;
  }
  if (t === ev.cancel_s && e.submitted) {
    try {
      d.submit(request(e, true));
    } catch (err) {
      // A restore may have ended a shed already: its cancellation is refused (409), rightly.
      if (!(err instanceof SitegateError && err.code === "CONFLICT")) throw err;
    }
  }
}

function request(e: Running, cancelled: boolean) {
  const ev = e.ev;
  return dispatchRequest.parse({
    mode: "live",
    event_slots: [
      {
        event_id: e.id,
        start_time: new Date(WORLD_T0 + ev.start_s * 1000).toISOString(),
        end_time: new Date(WORLD_T0 + (ev.start_s + ev.duration_s) * 1000).toISOString(),
        event_type: ev.type,
        event_quantity: ev.quantity_kw,
        event_unit: "kW",
        priority: ev.priority,
        mandatory: ev.mandatory,
        cancelled,
      },
    ],
  });
}

function localSpec(e: Running, now: number): EventSpec {
  return {
    event_id: e.id,
    source: `input:pv-limit-${e.index}`,
    mode: "live",
    event_type: "pv_limit",
    quantity: 0,
    unit: "w",
    quantity_w: 0,
    start_ms: now,
    end_ms: WORLD_T0 + (e.ev.start_s + e.ev.duration_s) * 1000,
    priority: e.ev.priority,
    mandatory: true,
    cancelled: false,
    limit_pct: e.ev.limit_pct ?? 50,
  };
}

/** One poll tick, as the poller makes it: every Modbus device read, the Zigbee devices' latest reports. */
async function poll(gw: Gateway, ts: number): Promise<void> {
  const devices: Array<{ device_id: string; metrics: Metrics }> = [];
  for (const [id, driver] of gw.drivers) {
    let m: Metrics;
    try {
      m = await driver.read(["fast"]);
    } catch (e) {
      // As the poller: offline at the first failed read, the last reading kept (stale).
      const h = gw.health.get(id) ?? HEALTHY;
      gw.health.set(id, {
        ...h,
        online: false,
        last_error: (e as Error).message,
        consecutive_failures: h.consecutive_failures + 1,
        op_mode: 0,
      });
      continue;
    }
    gw.health.set(id, { ...HEALTHY, last_ok_at: new Date(ts).toISOString() });
    gw.latest.set(id, m);
    devices.push({ device_id: id, metrics: m });
  }
  // The families that report on their own: their latest values (the Modbus family here reads nothing on the tick).
  for (const part of gw.local.read(ts)) if (!(part.readings instanceof Promise)) devices.push(...part.readings);
  gw.dispatcher.observe({ ts, devices });
}

export type Fail = (invariant: Invariant, message: string) => void;

/** The truth of every running event at this instant, and the shed invariant. */
function sample(sim: SimSite, events: Running[], claims: ReturnType<typeof claimsOf>, now: number, fail: Fail, t: number): void {
  sampleEvents(new Map(sim.pairs.map((p) => [p.id, p.own ? p.own() : p.actual() - p.shadow()])), events, claims, now, fail, t);
}

/**
 * One truth sample of every event whose window is open: the effect on grid import of each
 * device it drives (`delta`: W, against the site without dispatch), in its share of the
 * device; and the shed invariant on it.
 */
export function sampleEvents(
  delta: ReadonlyMap<string, number>,
  events: Running[],
  claims: ReturnType<typeof claimsOf>,
  now: number,
  fail: Fail,
  t: number,
): void {
  for (const e of events) {
    if (e.cancelledBeforeStart || now < e.from_ms || now >= e.until_ms || e.ev.type === "pv_limit" || e.ev.type === "restore") continue;
    let import_w = 0;
    for (const [id, cs] of claims) {
      const mine = cs.find((c) => c.event_id === e.id);
      if (!mine) continue;
      const total = cs.reduce((s, c) => s + c.watts, 0);
      import_w += (total > 0 ? mine.watts / total : 1 / cs.length) * (delta.get(id) ?? 0);
    }
    // A shed and a discharge lower import; a charge raises it.
    e.samples.push([now, e.ev.type === "charge" ? import_w : -import_w]);
    if (e.ev.type === "shed" && import_w > 50)
      fail(
        "shed_raises_import",
        `t=${t}s shed #${e.index} raises import by ${Math.round(import_w)} W (devices it drives: ${[...claims]
          .filter(([, cs]) => cs.some((c) => c.event_id === e.id))
          .map(([id]) => id)
          .join(", ")})`,
      );
  }
}

/** No device is asked for more than it can do: the watts of every event on it within its maximum. */
function checkLimits(sim: SimSite, claims: ReturnType<typeof claimsOf>, fail: Fail, t: number): void {
  for (const p of sim.pairs) {
    const cs = claims.get(p.id);
    if (!cs || p.max_power_w === undefined) continue;
    const total = cs.reduce((s, c) => s + c.watts, 0);
    if (total > p.max_power_w + 1) fail("limits", `t=${t}s ${p.id} asked for ${Math.round(total)} W, its maximum is ${p.max_power_w} W`);
  }
}

interface ReleaseWatch {
  /** Per device, polls since no event drives it. */
  unclaimed: Map<string, number>;
  faults: FaultTimeline;
  initial: ReadonlyMap<string, string>;
}

/**
 * A device no event has driven for a few polls reads back its state from before any event.
 * A device that had a fault gets the release backoff's cap after the fault cleared (the
 * gateway retries a release that did not read back, 1 s doubling to 60 s), plus two polls.
 */
function checkReleased(sim: SimSite, r: ReleaseWatch, claims: ReturnType<typeof claimsOf>, fail: Fail, t: number): void {
  for (const p of sim.pairs) {
    if (claims.has(p.id)) {
      r.unclaimed.set(p.id, 0);
      continue;
    }
    const n = (r.unclaimed.get(p.id) ?? Infinity) + 1;
    r.unclaimed.set(p.id, n);
    const before = r.initial.get(p.id);
    if (!r.faults.touches(p.id)) {
      if (n === RELEASE_SAMPLES && p.state() !== before)
        fail("pre_state", `t=${t}s ${p.id} is driven by no event but reads "${p.state()}", before any event "${before}"`);
      continue;
    }
    if (r.faults.active(p.id, t) || p.state() === before) continue;
    const since = Math.max(t - n + 1, r.faults.clearedAt(p.id));
    if (t - since === RELEASE_GRACE_S)
      fail(
        "released_after_faults",
        `t=${t}s ${p.id} is driven by no event, its faults cleared at ${r.faults.clearedAt(p.id)} s, and it still reads "${p.state()}", before any event "${before}"`,
      );
  }
}

/** B4 thresholds on one delivered/requested pair, with a watt of rounding either way: the status follows the quantity alone. */
function thresholdOk(status: string, delivered: number, requested: number): boolean {
  if (requested <= 0) return true;
  const ok = (d: number) => {
    const r = d / requested;
    if (r >= 0.95) return status === "completed";
    if (r < 0.05) return status === "failed";
    return status === "partial";
  };
  return ok(delivered) || ok(delivered - 1) || ok(delivered + 1);
}

/**
 * Whether the gateway can know a shed's delivery at all. With a grid meter it measures the
 * site's consumption against an undisturbed minute before the start (B4: no event driving
 * any device, looked for up to 15 min back): a rise of the house load after that minute (a
 * load step the shed did not make) is then in the meter's figure, and no gateway can tell it
 * from a load that did not drop, so such a shed is not judged (a fall is: the credit is capped
 * by what the switched loads account for). Otherwise knowable with a minute in which the
 * meter answered, or when every load it may switch is metered or rated (estimated from them).
 */
/** Whether a device could go stale in the event's window: a fault that silences it, or a restart. */
function staleWindow(w: WorldSpec, e: Running): boolean {
  const from = e.ev.start_s;
  const to = Math.min(e.ev.start_s + e.ev.duration_s, e.ev.cancel_s ?? Infinity);
  const silent = (w.faults ?? []).filter((f) => f.fault === "offline" || f.fault === "exception" || f.fault === "late_first");
  if (silent.some((f) => f.from_s < to && f.until_s > from)) return true;
  return (w.restarts ?? []).some((r) => r.at_s < to && r.at_s + r.down_s > from - 1);
}

function shedKnowable(w: WorldSpec, e: Running): boolean {
  const end = Math.min(e.ev.start_s + e.ev.duration_s, e.ev.cancel_s ?? Infinity);
  const baselineFrom = e.ev.start_s - 900 - 60;
  if (w.meter && (w.steps ?? []).some((s) => (s.load_delta_w ?? 0) > 0 && s.at_s >= baselineFrom && s.at_s <= end)) return false;
  if (w.relays.every((r) => r.rating !== "none") && w.plugs.every((p) => p.metering || p.rated)) return true;
  return w.meter && quietMinute(w, e);
}

/**
 * Whether a shed has a minute before its start, within 15 min and since the gateway was last
 * up again, that no event could drive a device in and in which the meter had no fault.
 */
function quietMinute(w: WorldSpec, e: Running): boolean {
  const busy = w.events
    .filter((o) => o !== e.ev && !(o.cancel_s !== undefined && o.cancel_s < o.start_s))
    .map((o) => [o.start_s, Math.min(o.start_s + o.duration_s, o.cancel_s ?? Infinity)] as const);
  const meterDown = (w.faults ?? [])
    .filter((f) => f.device === "grid" && f.fault !== "ignore_writes" && f.fault !== "refuse_writes")
    .map((f) => [f.from_s, f.until_s] as const);
  const start = e.ev.start_s;
  // The gateway keeps its readings in memory: a restart before the start leaves it none from before it was up again.
  const up = Math.max(0, ...(w.restarts ?? []).filter((r) => r.at_s <= start).map((r) => r.at_s + r.down_s));
  for (let a = Math.max(1, up, start - 900); a + 60 <= start; a++)
    if ([...busy, ...meterDown].every(([s, t]) => t <= a || s >= a + 60)) return true;
  return false;
}

export function outcome(w: WorldSpec, e: Running, responses: ExecutionResponse[], fail: Fail): EventOutcome {
  const ev = e.ev;
  const out: EventOutcome = { index: e.index, event_id: e.id, type: ev.type, requested_w: ev.quantity_kw * 1000 };
  if (ev.type === "pv_limit") return out;
  const mine = responses.filter((r) => r.event_id === e.id);
  // An event the partner never sent (its end passed while the gateway was down) has no response either.
  const want = e.cancelledBeforeStart || !e.submitted ? 0 : 1;
  if (mine.length !== want) fail("one_response", `event #${e.index} (${ev.type}) has ${mine.length} execution responses, expected ${want}`);
  const r = mine[0];
  if (!r) return out;
  out.response = r;
  const det = r.details as {
    delivered_quantity: number;
    requested_quantity: number;
    devices?: Array<{ device_id: string; status: string; requested_w: number; delivered_w: number }>;
  };
  out.reported_w = det.delivered_quantity * 1000;
  const devs = det.devices ?? [];
  if (!thresholdOk(r.status, out.reported_w, out.requested_w))
    fail("thresholds", `event #${e.index} (${ev.type}) is ${r.status} with ${Math.round(out.reported_w)} W of ${out.requested_w} W`);
  for (const d of devs)
    if (d.status !== "skipped" && !thresholdOk(d.status, d.delivered_w, d.requested_w))
      fail(
        "thresholds",
        `event #${e.index} (${ev.type}) device ${d.device_id} is ${d.status} with ${d.delivered_w} W of ${d.requested_w} W`,
      );
  // The window ends at end_time, a cancellation, or when a restore ended the shed: the
  // response's time. One under a second (cancelled the moment it started) has no truth to compare with.
  const until = Math.min(e.until_ms, Date.parse(r.timestamp));
  const samples = e.samples.filter(([at]) => at < until);
  if (ev.type === "restore" || samples.length === 0) return out;
  out.truth_w = Math.max(0, samples.reduce((a, [, v]) => a + v, 0) / samples.length);
  const err = Math.abs(out.reported_w - out.truth_w);
  out.judged = ev.type !== "shed" || shedKnowable(w, e);
  // B4: with a stale reading (a device offline, answering exceptions or late, or the gap of a
  // restart) the event says `measured: false` and never reports more than the meter saw; it
  // is held to that bound only. An estimate without staleness (a rating) is judged in full.
  const stale = (r.details as { measured?: boolean }).measured === false && staleWindow(w, e);
  const over = out.reported_w - out.truth_w;
  if (out.judged && (stale ? over : err) > Math.max(200, 0.1 * out.truth_w))
    fail(
      "delivered_vs_truth",
      `event #${e.index} (${ev.type} ${ev.quantity_kw} kW) reports ${Math.round(out.reported_w)} W, the simulator saw ${Math.round(out.truth_w)} W`,
    );
  return out;
}
