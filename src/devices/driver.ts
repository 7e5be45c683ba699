// A device on a bus, driven by its profile: pairing (identity registers or SunSpec
// discovery), the resolved register map, block reads of the points due, and decoding
// into canonical metrics. Holds a Bus handle and a unit id, never a socket.
import type { CheckWrite } from "../config/device-schema.js";
import { SitegateError, errorMessage } from "../errors.js";
import { PRIORITY, type Bus, type Priority } from "../modbus/bus.js";
import { decodeRaw, isSunSpecNotImplemented, readingValue, typeRegs, type ValueType, type WordOrder } from "../modbus/codec.js";
import { planBlocks, TCP_GAP_REGS, type Block, type Range, type Table } from "../modbus/planner.js";
import type { Endpoint } from "../modbus/endpoint.js";
import type { Profile, SunSpecProfile, WriteStep } from "../profiles/schema.js";
import { opModeCode, typed } from "./roles.js";
import type { DeviceDescriptor, Metrics, OpMode } from "./types.js";

export type PointClass = "fast" | "slow";

export interface ResolvedPoint extends Range {
  metric: string;
  type: ValueType;
  word_order: WordOrder;
  scale: number;
  sf_address?: number;
  sunspec_na: boolean;
  class: PointClass;
  bitmask: boolean;
}

export interface SunSpecModelInfo {
  id: number;
  /** Address of the model id register. */
  address: number;
  length: number;
}

const SUNS = [0x5375, 0x6e53];
const MAX_MODELS = 64;

export class DeviceDriver {
  private points: ResolvedPoint[] | null = null;
  private models: SunSpecModelInfo[] = [];
  private readonly plans = new Map<string, { blocks: Block[]; ranges: Range[] }>();
  descriptor: DeviceDescriptor | null = null;

  /** The framing this device wants of its bus (by default the bus's as it was made). */
  readonly endpoint: Endpoint;

  constructor(
    readonly bus: Bus,
    readonly unit: number,
    readonly profile: Profile,
    endpoint?: Endpoint,
  ) {
    this.endpoint = endpoint ?? bus.endpoint;
    bus.setDeviceDelay(unit, profile.delay_ms);
  }

  get timeoutMs(): number {
    return this.profile.timeout_ms;
  }

  get paired(): boolean {
    return this.points !== null;
  }

  get sunspecModels(): readonly SunSpecModelInfo[] {
    return this.models;
  }

  private readRegs(table: Table, address: number, count: number, priority: Priority, retries = 1): Promise<number[]> {
    return this.bus.read(this.unit, table, address, count, { priority, timeoutMs: this.profile.timeout_ms, retries });
  }

  /** Reads identity (or discovers the SunSpec model chain) and resolves the register map. */
  async pair(priority: Priority = PRIORITY.pairing): Promise<DeviceDescriptor> {
    const p = this.profile;
    const d = p.kind === "sunspec" ? await this.pairSunSpec(p, priority) : await this.pairFixed(p, priority);
    this.descriptor = d;
    this.plans.clear();
    return d;
  }

  private async pairFixed(p: Extract<Profile, { kind: "fixed" }>, priority: Priority): Promise<DeviceDescriptor> {
    const identity: Record<string, string> = {};
    for (const r of p.identity) {
      const words = await this.readRegs(r.table, r.address, typeRegs(r.type, r.length), priority);
      identity[r.name] = String(decodeRaw(r.type, words, r.word_order));
    }
    const points: ResolvedPoint[] = p.points.map((pt) => ({
      metric: pt.metric,
      table: pt.table,
      address: pt.address,
      count: pt.table === "coil" || pt.table === "discrete" ? (pt.length ?? 1) : typeRegs(pt.type, pt.length),
      type: pt.type,
      word_order: pt.word_order,
      scale: pt.scale,
      sf_address: pt.sf_address,
      sunspec_na: pt.sunspec_na,
      class: pt.class,
      bitmask: pt.bitmask,
    }));
    if (p.identity.length === 0) {
      // No identity registers: the device is there if its first point answers.
      const first = points[0];
      await this.readRegs(first.table, first.address, first.count, priority);
    }
    this.points = points;
    return { ...typed(p.role), max_power_w: p.max_power_w, capabilities: p.capabilities, profile: p.name, identity };
  }

  /** The first of the profile's base addresses that holds the SunSpec marker. */
  private async sunSpecBase(p: SunSpecProfile, priority: Priority): Promise<number> {
    let lastError: unknown = null;
    for (const b of p.bases) {
      try {
        const w = await this.readRegs("holding", b, 2, priority);
        if (w[0] === SUNS[0] && w[1] === SUNS[1]) return b;
      } catch (e) {
        lastError = e;
        // No answer at all: the device is not there; do not wait two more timeouts.
        if ((e as SitegateError).code === "MODBUS_TIMEOUT" || (e as SitegateError).code === "MODBUS_DISCONNECTED") throw e;
      }
    }
    throw new SitegateError(
      "PAIRING_FAILED",
      `no SunSpec marker at ${p.bases.join(", ")}${lastError ? `: ${(lastError as Error).message}` : ""}`,
    );
  }

  /** The device's rated power from the first model of the profile's list that implements it. */
  private async sunSpecMaxPower(p: SunSpecProfile, models: SunSpecModelInfo[], priority: Priority): Promise<number | undefined> {
    for (const mp of p.max_power) {
      const m = models.find((x) => x.id === mp.model);
      if (!m) continue;
      const regs = await this.readRegs("holding", m.address + mp.offset, 1, priority);
      if (isSunSpecNotImplemented("u16", regs)) continue;
      let sf = 0;
      if (mp.sf_offset !== undefined) {
        const s = await this.readRegs("holding", m.address + mp.sf_offset, 1, priority);
        if (isSunSpecNotImplemented("sunssf", s)) continue;
        sf = decodeRaw("sunssf", s) as number;
      }
      return readingValue(regs[0], "u16", sf);
    }
    return undefined;
  }

  private async pairSunSpec(p: SunSpecProfile, priority: Priority): Promise<DeviceDescriptor> {
    const base = await this.sunSpecBase(p, priority);
    // Walk the chain, one header read per model (some devices omit the end model's length).
    const models: SunSpecModelInfo[] = [];
    let addr = base + 2;
    while (models.length < MAX_MODELS && addr < 0xffff) {
      const [id, len] = await this.readRegs("holding", addr, addr + 1 <= 0xffff ? 2 : 1, priority);
      if (id === 0xffff || id === 0) break;
      models.push({ id, address: addr, length: len });
      addr += 2 + len;
    }
    const common = models.find((m) => m.id === 1);
    const identity: Record<string, string> = {};
    if (common) {
      const words = await this.readRegs("holding", common.address, Math.min(125, common.length + 2), priority);
      for (const f of p.identity) {
        const w = words.slice(f.offset, f.offset + f.length);
        if (w.length === f.length && !isSunSpecNotImplemented("string", w)) identity[f.name] = String(decodeRaw("string", w));
      }
    }
    const points: ResolvedPoint[] = [];
    for (const m of models) {
      for (const pt of p.models[String(m.id)] ?? []) {
        if (pt.offset + typeRegs(pt.type, pt.length) > m.length + 2) continue;
        points.push({
          metric: pt.metric,
          table: "holding",
          address: m.address + pt.offset,
          count: typeRegs(pt.type, pt.length),
          type: pt.type,
          word_order: "big",
          scale: pt.scale,
          sf_address: pt.sf_offset === undefined ? undefined : m.address + pt.sf_offset,
          sunspec_na: true,
          class: pt.class,
          bitmask: false,
        });
      }
    }
    const has = new Set(models.map((m) => m.id));
    const rule = p.roles.find((r) => r.models.every((id) => has.has(id)));
    if (!rule)
      throw new SitegateError("PAIRING_FAILED", `SunSpec device with models ${[...has].join(", ")} has no role in profile ${p.name}`);
    const max_power_w = await this.sunSpecMaxPower(p, models, priority);
    // Only a complete pairing changes what the driver polls.
    this.models = models;
    const seen = new Set<string>(); // a metric in two models (soc in 124 and 802): the first wins
    this.points = points.filter((pt) => (seen.has(pt.metric) ? false : (seen.add(pt.metric), true)));
    return { ...typed(rule.role), max_power_w, capabilities: rule.capabilities, profile: p.name, identity };
  }

  /** The device's own operating mode from a reading, by the profile's op-mode map (unknown without one). */
  opMode(metrics: Metrics): OpMode {
    const map = this.profile.op_mode;
    const state = map ? metrics[map.metric] : undefined;
    return opModeCode(state === undefined ? "unknown" : (map!.states[String(state)] ?? "unknown"));
  }

  /**
   * Which coils are closed, as a bit mask (coil at the point's address = bit 0), from a
   * reading: the profile's bit-mask point of coils. Undefined for a device without one.
   */
  coilsOn(metrics: Metrics): number | undefined {
    const p = this.profile;
    const point = p.kind === "fixed" ? p.points.find((pt) => pt.bitmask && pt.table === "coil") : undefined;
    return point ? metrics[point.metric] : undefined;
  }

  /**
   * A configure request's check write (mb_check_write): written with function 6 and read
   * back in the pairing lane; any failure is REGISTRY_WRITE_FAILED naming the write.
   */
  async checkWrite(w: CheckWrite): Promise<void> {
    const value = w.reg_value < 0 ? w.reg_value + 0x10000 : w.reg_value;
    const what = `check write ${w.reg_cmd_id} (register ${w.reg_reg} = ${w.reg_value})`;
    const failed = (message: string, detail: string, cause?: unknown) =>
      new SitegateError("REGISTRY_WRITE_FAILED", message, { cause, details: [{ path: `reg_cmd_id:${w.reg_cmd_id}`, message: detail }] });
    const opts = { priority: PRIORITY.pairing, timeoutMs: this.timeoutMs };
    try {
      await this.bus.writeRegisters(this.unit, w.reg_reg, [value], { ...opts, fn: 6 });
    } catch (e) {
      throw failed(`${what} failed: ${errorMessage(e)}`, errorMessage(e), e);
    }
    let back: number[];
    try {
      back = await this.bus.read(this.unit, "holding", w.reg_reg, 1, opts);
    } catch (e) {
      throw failed(`${what}: read-back failed: ${errorMessage(e)}`, errorMessage(e), e);
    }
    if (back[0] !== value) throw failed(`${what} did not stick: read back ${back[0]}`, `read back ${back[0]}`);
  }

  /** Absolute address of a SunSpec action step, or its fixed address. */
  resolveWrite(step: WriteStep): { table: "holding" | "coil"; address: number } {
    if (step.address !== undefined) return { table: step.table, address: step.address };
    const m = this.models.find((x) => x.id === step.model);
    if (!m || step.offset === undefined) throw new SitegateError("DEVICE_NOT_FOUND", `device has no SunSpec model ${step.model}`);
    return { table: step.table, address: m.address + step.offset };
  }

  /** Unneeded registers the planner reads through: from the bus's line timing (its framing), or the TCP figure. */
  get maxGap(): number {
    return this.bus.timing?.gapRegs ?? TCP_GAP_REGS;
  }

  /** The blocks a poll of these point classes reads (planned once per line timing, then reused). */
  plan(classes: readonly PointClass[]): { blocks: Block[]; ranges: Range[] } {
    return this.planFor(`${[...classes].sort().join(",")}`, (pt) => classes.includes(pt.class));
  }

  private planFor(name: string, pick: (pt: ResolvedPoint) => boolean): { blocks: Block[]; ranges: Range[] } {
    if (!this.points) throw new Error("device is not paired");
    const key = `${name}/${this.maxGap}`;
    let plan = this.plans.get(key);
    if (!plan) {
      const ranges: Range[] = [];
      for (const pt of this.points) {
        if (!pick(pt)) continue;
        ranges.push(pt);
        if (pt.sf_address !== undefined) ranges.push({ table: "holding", address: pt.sf_address, count: 1 });
      }
      const unreadable = this.profile.kind === "fixed" ? this.profile.unreadable : [];
      plan = { blocks: planBlocks(ranges, { maxRegs: this.profile.max_read_regs, maxGap: this.maxGap, unreadable }), ranges };
      this.plans.set(key, plan);
    }
    return plan;
  }

  /**
   * Reads the points of these classes and decodes them. The first failed block fails
   * the whole read (a device that does not answer costs one timeout, not one per block).
   */
  async read(classes: readonly PointClass[], priority: Priority = PRIORITY.poll, retries = 1): Promise<Metrics> {
    if (!this.points) await this.pair(priority);
    return this.readPlanned(this.plan(classes).blocks, (pt) => classes.includes(pt.class), priority, retries);
  }

  /**
   * Reads these metrics only (their registers and scale factors), of a paired device: the
   * power point after a setpoint write. Empty when the device has none of them, without
   * a request.
   */
  async readMetrics(metrics: readonly string[], priority: Priority, retries = 0): Promise<Metrics> {
    if (!this.points) return {};
    const pick = (pt: ResolvedPoint) => metrics.includes(pt.metric);
    const { blocks } = this.planFor(`metrics:${[...metrics].sort().join(",")}`, pick);
    return blocks.length ? this.readPlanned(blocks, pick, priority, retries) : {};
  }

  private async readPlanned(
    blocks: readonly Block[],
    pick: (pt: ResolvedPoint) => boolean,
    priority: Priority,
    retries: number,
  ): Promise<Metrics> {
    const data = new Map<Table, Map<number, number>>();
    for (const b of blocks) {
      const words = await this.readRegs(b.table, b.address, b.count, priority, retries);
      let t = data.get(b.table);
      if (!t) data.set(b.table, (t = new Map()));
      for (let i = 0; i < words.length; i++) t.set(b.address + i, words[i]);
    }
    return this.decode(pick, data);
  }

  private decode(pick: (pt: ResolvedPoint) => boolean, data: Map<Table, Map<number, number>>): Metrics {
    const out: Metrics = {};
    for (const pt of this.points!) {
      if (!pick(pt)) continue;
      const t = data.get(pt.table);
      if (!t) continue;
      const words: number[] = [];
      for (let i = 0; i < pt.count; i++) words.push(t.get(pt.address + i)!);
      if (pt.bitmask) {
        out[pt.metric] = words.reduce((acc, bit, i) => acc + (bit ? 2 ** i : 0), 0);
        continue;
      }
      if (pt.type === "string") continue;
      if (pt.sunspec_na && isSunSpecNotImplemented(pt.type, words, pt.word_order)) continue;
      let sf = 0;
      if (pt.sf_address !== undefined) {
        const s = data.get("holding")?.get(pt.sf_address);
        if (s === undefined || s === 0x8000) continue; // scale factor not implemented: no value
        sf = s >= 0x8000 ? s - 0x10000 : s;
        if (sf < -10 || sf > 10) continue;
      }
      const raw = decodeRaw(pt.type, words, pt.word_order) as number;
      if (!Number.isFinite(raw)) continue;
      out[pt.metric] = readingValue(raw, pt.type, sf, pt.scale);
    }
    return out;
  }
}
