// A device on a bus, driven by its profile: pairing (identity registers or SunSpec
// discovery), the resolved register map, block reads of the points due, and decoding
// into canonical metrics. Holds a Bus handle and a unit id, never a socket.
import type { CheckWrite } from "../config-schema.js";
import { SitegateError, errorMessage } from "../../errors.js";
import { PRIORITY, type Bus, type Priority } from "../bus.js";
import { decodeRaw, isSunSpecNotImplemented, readingValue, typeRegs } from "../codec.js";
import { planBlocks, TCP_GAP_REGS, type Range, type Table } from "../planner.js";
import type { Endpoint } from "../endpoint.js";
import type { ActionName } from "../../profiles/schema.js";
import { valueName } from "../../profiles/value-names.js";
import { enumValue, type FixedProfile, type Profile, type ReadBack, type SunSpecProfile, type WriteStep } from "../../profiles/schema.js";
import { expectationHolds, identityMismatch } from "./identify.js";
import { sunSpecChain, wordAt, type SunSpecModelInfo } from "./sunspec-chain.js";
import { opModeCode } from "../../model/roles.js";
import { modbusTyped } from "./wire-types.js";
import type { DeviceDescriptor, Metrics, OpMode } from "../../model/device.js";
import {
  decodePoints,
  isSentinel,
  resolveFixedPoints,
  sentinelsOf,
  type PointClass,
  type ResolvedPoint,
  type UnitBlock,
} from "./decode.js";
import { Unavailable } from "./unavailable.js";
import { readPoints, type UnitRange } from "./point-reads.js";
import { requireAnswers, sunSpecRolePoints } from "./required.js";
import { relocate } from "./relocate.js";

export { isSentinel, type Direction, type PointClass, type ResolvedPoint, type UnitBlock } from "./decode.js";

const SUNS = [0x5375, 0x6e53];

export class DeviceDriver {
  private points: ResolvedPoint[] | null = null;
  private models: SunSpecModelInfo[] = [];
  private readonly plans = new Map<string, { blocks: UnitBlock[]; ranges: Range[] }>();
  descriptor: DeviceDescriptor | null = null;
  /** The points this device does not have (left out of polls, probed again hourly). */
  readonly unavailable: Unavailable;

  /** The framing this device wants of its bus (by default the bus's as it was made). */
  readonly endpoint: Endpoint;

  constructor(
    readonly bus: Bus,
    readonly unit: number,
    readonly profile: Profile,
    endpoint?: Endpoint,
    now: () => number = Date.now,
  ) {
    this.endpoint = endpoint ?? bus.endpoint;
    this.unavailable = new Unavailable(now);
    bus.setDeviceDelay(unit, profile.delay_ms, profile.connect_delay_ms);
  }

  get timeoutMs(): number {
    return this.profile.timeout_ms;
  }

  get paired(): boolean {
    return this.points !== null;
  }

  /** The points of the paired device (empty before pairing): where each is on this device. */
  get resolvedPoints(): readonly ResolvedPoint[] {
    return this.points ?? [];
  }

  get sunspecModels(): readonly SunSpecModelInfo[] {
    return this.models;
  }

  private readRegs(table: Table, address: number, count: number, priority: Priority, retries = 1, unit = this.unit): Promise<number[]> {
    return this.bus.read(unit, table, address, count, { priority, timeoutMs: this.profile.timeout_ms, retries });
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
      const words = await this.readRegs(r.table, r.address, typeRegs(r.type, r.length), priority, 1, r.unit ?? this.unit);
      const value = decodeRaw(r.type, words, r.word_order);
      // A device that answers but is another one (another brand's map at the same unit) is
      // refused, not paired to read and write registers that mean something else there.
      if (r.expect && !expectationHolds(r, value)) throw identityMismatch(r, value, r.unit ?? this.unit, p.enums);
      identity[r.name] = String(value);
    }
    const points = resolveFixedPoints(p);
    if (p.identity.length === 0) {
      // No identity registers: the device is there if its first point answers.
      const first = points[0];
      // The profile schema asks for at least one point; a profile made in code may not.
      if (first === undefined) throw new SitegateError("PROFILE_INVALID", `profile ${p.name} has neither identity registers nor points`);
      await this.readRegs(first.table, first.address, first.count, priority, 1, first.unit ?? this.unit);
    }
    const max_power_w = (await this.ratedPower(p, priority)) ?? p.max_power_w;
    const read = (b: UnitRange) => this.readRegs(b.table, b.address, b.count, priority, 1, b.unit ?? this.unit);
    await requireAnswers(p.name, points, this.unit, read);
    this.unavailable.reset();
    this.points = await relocate(p, points, read, this.unavailable);
    return { ...modbusTyped(p.role), max_power_w, capabilities: p.capabilities, profile: p.name, identity };
  }

  /** The rated power the device reports in its register (undefined when it has none, or reads "not available" or 0). */
  private async ratedPower(p: FixedProfile, priority: Priority): Promise<number | undefined> {
    const r = p.max_power;
    if (!r) return undefined;
    const words = await this.readRegs(r.table, r.address, typeRegs(r.type), priority, 1, r.unit ?? this.unit);
    if (isSentinel(words, r.word_order, sentinelsOf(r.na, p.not_available, r.type))) return undefined;
    const raw = decodeRaw(r.type, words, r.word_order) as number;
    if (!Number.isFinite(raw) || raw <= 0) return undefined;
    return readingValue(raw, r.type, 0, r.scale);
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
      return readingValue(wordAt(regs, 0, `unit ${this.unit} SunSpec model ${mp.model} rated power`), "u16", sf);
    }
    return undefined;
  }

  private async pairSunSpec(p: SunSpecProfile, priority: Priority): Promise<DeviceDescriptor> {
    const base = await this.sunSpecBase(p, priority);
    const models: SunSpecModelInfo[] = [];
    for await (const m of sunSpecChain(this.unit, base, (addr, count) => this.readRegs("holding", addr, count, priority))) models.push(m);
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
          na: [],
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
          required: pt.required,
        });
      }
    }
    const has = new Set(models.map((m) => m.id));
    const rule = p.roles.find((r) => r.models.every((id) => has.has(id)));
    if (!rule)
      throw new SitegateError("PAIRING_FAILED", `SunSpec device with models ${[...has].join(", ")} has no role in profile ${p.name}`);
    const read = (b: UnitRange) => this.readRegs(b.table, b.address, b.count, priority);
    const resolved = await sunSpecRolePoints(p, rule.role, [...has], points, this.unit, read);
    const max_power_w = await this.sunSpecMaxPower(p, models, priority);
    // Only a complete pairing changes what the driver polls.
    this.models = models;
    this.unavailable.reset();
    this.points = resolved;
    return { ...modbusTyped(rule.role), max_power_w, capabilities: rule.capabilities, profile: p.name, identity };
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

  /** The name the profile gives a point's value (a state), if it names it. */
  label(metric: string, value: number): string | undefined {
    return valueName(this.profile, metric, value);
  }

  /**
   * Reads the profile's read-back registers of an action (in the control lane) and throws
   * CONTROL_NOT_CONFIRMED naming the first that does not hold its expected value.
   */
  async readBack(action: ActionName, priority: Priority = PRIORITY.control): Promise<void> {
    for (const c of this.profile.readback[action] ?? []) {
      const unit = c.unit ?? this.unit;
      const words = await this.readRegs(c.table, c.address, typeRegs(c.type), priority, 1, unit);
      const got = decodeRaw(c.type, words, c.word_order) as number;
      const want = this.expected(c);
      if (got !== want) {
        const named = typeof c.expect === "string" ? ` (${c.expect})` : "";
        throw new SitegateError(
          "CONTROL_NOT_CONFIRMED",
          `${action} did not take effect: ${c.table} register ${c.address} of unit ${unit} reads ${got}, expected ${want}${named}`,
        );
      }
    }
  }

  private expected(c: ReadBack): number {
    return typeof c.expect === "number" ? c.expect : enumValue(this.profile.enums, c.expect)!;
  }

  /** Absolute address of a SunSpec action step, or its fixed address (and its sub-device's unit id). */
  resolveWrite(step: WriteStep): { table: "holding" | "coil"; address: number; unit?: number } {
    const w = step.when;
    if (w && !w.values.map(String).includes(this.descriptor?.identity?.[w.identity] ?? ""))
      throw new SitegateError("DEVICE_NOT_FOUND", `the step is for ${w.identity} ${w.values.join(", ")}`);
    if (step.address !== undefined)
      return { table: step.table, address: step.address, ...(step.unit === undefined ? {} : { unit: step.unit }) };
    const m = this.models.find((x) => x.id === step.model);
    if (!m || step.offset === undefined) throw new SitegateError("DEVICE_NOT_FOUND", `device has no SunSpec model ${step.model}`);
    return { table: step.table, address: m.address + step.offset };
  }

  /** Unneeded registers the planner reads through: from the bus's line timing (its framing), or the TCP figure. */
  get maxGap(): number {
    return this.bus.timing?.gapRegs ?? TCP_GAP_REGS;
  }

  /** The blocks a poll of these point classes reads (planned once per line timing, then reused). */
  plan(classes: readonly PointClass[]): { blocks: UnitBlock[]; ranges: Range[] } {
    return this.planFor(`${[...classes].sort().join(",")}`, (pt) => classes.includes(pt.class));
  }

  private planFor(name: string, pick: (pt: ResolvedPoint) => boolean): { blocks: UnitBlock[]; ranges: Range[] } {
    if (!this.points) throw new SitegateError("INTERNAL", "device is not paired");
    const skipped = this.unavailable.skippedNow();
    const key = `${name}/${this.maxGap}/${skipped.join(",")}`;
    let plan = this.plans.get(key);
    if (!plan) {
      // Ranges per unit id: a sub-device's registers are read in requests of its own.
      const byUnit = new Map<number | undefined, Range[]>();
      const add = (unit: number | undefined, r: Range) => {
        const u = unit === this.unit ? undefined : unit;
        byUnit.set(u, [...(byUnit.get(u) ?? []), r]);
      };
      for (const pt of this.points) {
        if (!pick(pt) || skipped.includes(pt.metric)) continue;
        add(pt.unit, pt);
        if (pt.sf_address !== undefined) add(pt.unit, { table: "holding", address: pt.sf_address, count: 1 });
        if (pt.direction) add(pt.direction.unit ?? pt.unit, pt.direction);
        if (pt.minus) add(pt.unit, pt.minus);
      }
      const unreadable = this.profile.kind === "fixed" ? this.profile.unreadable : [];
      const opts = { maxRegs: this.profile.max_read_regs, maxGap: this.maxGap, unreadable };
      const blocks: UnitBlock[] = [];
      for (const [unit, ranges] of byUnit) blocks.push(...planBlocks(ranges, opts).map((b) => (unit === undefined ? b : { ...b, unit })));
      plan = { blocks, ranges: [...byUnit.values()].flat() };
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
    blocks: readonly UnitBlock[],
    pick: (pt: ResolvedPoint) => boolean,
    priority: Priority,
    retries: number,
  ): Promise<Metrics> {
    const points = (this.points ?? []).filter((pt) => pick(pt) && !this.unavailable.skipped(pt.metric));
    const read = (b: UnitRange, n: number) => this.readRegs(b.table, b.address, b.count, priority, n, b.unit ?? this.unit);
    const data = await readPoints({ blocks, points, unit: this.unit, read, retries, unavailable: this.unavailable });
    return decodePoints(this.points ?? [], pick, data, this.unit);
  }
}
