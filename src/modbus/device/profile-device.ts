// A Modbus device as the one device model sees it: its profile's actions offered as
// capabilities (charge/discharge: power, curtail: curtail, shed: switch), every write
// and read in the control lane of its bus (ahead of polling), its pre-event state as the
// raw registers and coils an action touches (pre-state.ts). Its latest values and health
// come from the family's polling (polling.ts), which reads it on the site clock's ticks. A new device model needs a
// profile file, not code here.
import type { DeviceConfig } from "../config-schema.js";
import { systemClock, type Clock } from "../../util/clock.js";
import { SitegateError } from "../../errors.js";
import type {
  Curtailable,
  Device,
  DeviceDescriptor,
  DeviceHealth,
  DeviceInfo,
  Metrics,
  PowerControllable,
  PreState,
  Switchable,
} from "../../model/device.js";
import { movesAsAsked, pctOf } from "../../model/power.js";
import { opModeCode } from "../../model/roles.js";
import type { ActionName } from "../../model/vocabulary.js";
import type { RegisteredDevice } from "./types.js";
import { PRIORITY } from "../bus.js";
import { actionCells, planControlWrites } from "./control-values.js";
import type { DeviceDriver } from "./driver.js";
import type { DriverPool } from "./pool.js";
import { asRawWrites, capturePre, preOf, verifyPre, type CellRead } from "./pre-state.js";
import { changedOnly } from "./flash.js";
import { withLimits } from "./limits.js";
import { PartialWriteError } from "../../model/partial-write.js";
import { writeLength, type ActionParams, type RawWrite } from "./raw-write.js";
import { modbusSpec, specAddress } from "./spec.js";

/** What the Modbus family's polling (polling.ts) keeps of each device: latest values and health, and the remote flag. */
export interface ModbusReadings {
  latest(deviceId: string): Metrics | undefined;
  health(deviceId: string): DeviceHealth | undefined;
  /** A reading taken outside the poll: the latest values take it at once. */
  confirm(deviceId: string, metrics: Metrics): void;
  setRemote(deviceId: string, remote: boolean): void;
}

/** Between two reads of a write-only action's effect (confirm_window_ms). */
const CONFIRM_POLL_MS = 500;

/** What a confirmation read after a setpoint write reads: the device's AC power. */
const CONFIRM_METRICS = ["power_w"] as const;

const NO_HEALTH: DeviceHealth = {
  online: false,
  last_ok_at: null,
  last_error: null,
  consecutive_failures: 0,
  op_mode: opModeCode("unknown"),
};

export class ProfileDevice implements Device {
  readonly id: string;
  readonly power?: PowerControllable;
  readonly curtail?: Curtailable;
  readonly switch?: Switchable;

  constructor(
    readonly registered: RegisteredDevice,
    private readonly pool: Pick<DriverPool, "driverFor">,
    private readonly readings: ModbusReadings,
    /** The clock confirm_window_ms runs on (a test's fake one moves by hand). */
    private readonly clock: Clock = systemClock,
  ) {
    this.id = registered.config.device_id;
    const offers = this.offered();
    const refreshMs = this.refreshMs();
    const directions = (["charge", "discharge"] as const).filter((d) => offers.has(d));
    if (directions.length)
      this.power = {
        refreshMs,
        directions,
        setPower: (direction, watts) => this.setPower(direction, watts),
        showsForced: (direction, metrics) => this.showsForced(direction, metrics),
      };
    if (offers.has("curtail")) this.curtail = { refreshMs, setLimit: (pct) => this.act("curtail", { pct }) };
    if (offers.has("shed")) this.switch = { refreshMs, switchOff: () => this.act("shed", {}), outputsOn: () => this.outputsOn() };
  }

  /**
   * The actions it offers: those pairing found it has (its role rule's capabilities: a
   * SunSpec PV inverter is not charged though its profile can write a battery), or before
   * it has paired its profile's list, that its profile writes.
   */
  private offered(): Set<ActionName> {
    let found: readonly string[];
    try {
      found = this.registered.descriptor?.capabilities ?? this.driver().profile.capabilities;
    } catch {
      return new Set(); // no driver: nothing to control
    }
    const listed = new Set(found);
    return new Set([...this.profileActions()].filter((a) => listed.has(a)));
  }

  private get config(): DeviceConfig {
    return this.registered.config;
  }

  /** Made once: a ProfileDevice stands for one registry row, and the family makes a new one when the row changes. */
  private infoOnce: Readonly<DeviceInfo> | undefined;

  info(): DeviceInfo {
    const c = this.config;
    return (this.infoOnce ??= {
      device_id: this.id,
      ...(c.device_name !== undefined ? { device_name: c.device_name } : {}),
      family: "modbus",
      address: this.address(),
      ...(c.rated_power_w !== undefined ? { rated_power_w: c.rated_power_w } : {}),
      ...(c.shed_priority !== undefined ? { shed_priority: c.shed_priority } : {}),
      ...this.answerTimeout(),
      fully_configured: this.registered.fully_configured,
    });
  }

  private answerTimeout(): { answer_timeout_ms?: number } {
    try {
      return { answer_timeout_ms: this.driver().timeoutMs };
    } catch {
      return {}; // no driver: the default applies
    }
  }

  private address(): string {
    try {
      return specAddress(modbusSpec(this.config));
    } catch {
      return "?"; // a stored entry without its mb_* fields (never from a configure body): shown, not fatal
    }
  }

  /**
   * What pairing found, its rated power capped by the battery's published maximum
   * (its live charge/discharge limits). A battery whose profile reads no rated power takes the config's
   * nameplate (device sync shows the same), so that a brand without a rated-power
   * register (the Victron GX) still takes a share of an event.
   */
  descriptor(): DeviceDescriptor | null {
    const d = this.rated();
    const limit = this.batteryLimit();
    if (!d || limit === undefined || (d.max_power_w !== undefined && d.max_power_w <= limit)) return d;
    return { ...d, max_power_w: limit };
  }

  private rated(): DeviceDescriptor | null {
    const d = this.registered.descriptor;
    if (!d || d.max_power_w !== undefined || d.role !== "battery" || typeof this.config.rated_power_w !== "number") return d;
    return { ...d, max_power_w: this.config.rated_power_w };
  }

  /** The battery's published maximum: the larger of its live charge and discharge limits, when it reads them. */
  private batteryLimit(): number | undefined {
    const m = this.latest();
    const c = positive(m.max_charge_power_w);
    const d = positive(m.max_discharge_power_w);
    return c === undefined ? d : d === undefined ? c : Math.max(c, d);
  }

  latest(): Metrics {
    return withLimits(this.readings.latest(this.id) ?? {});
  }

  health(): DeviceHealth {
    const h = this.readings.health(this.id) ?? NO_HEALTH;
    let unavailable: string[] = [];
    try {
      const u = this.driver().unavailable;
      if (u.size === 0) return h; // the common case, asked per device sync request: no list made
      unavailable = u.list().map((p) => p.metric);
    } catch {
      // no driver: nothing is known of its points
    }
    return unavailable.length ? { ...h, unavailable_points: unavailable } : h;
  }

  setRemote(remote: boolean): void {
    this.readings.setRemote(this.id, remote);
  }

  /** The driver; throws when there is none (its profile or RTU port is gone). */
  driver(): DeviceDriver {
    return this.pool.driverFor(this.config);
  }

  private profileActions(): Set<ActionName> {
    try {
      const a = this.driver().profile.actions;
      return new Set((Object.keys(a) as ActionName[]).filter((k) => (a[k]?.length ?? 0) > 0));
    } catch {
      return new Set(); // no driver: nothing to control
    }
  }

  private refreshMs(): number {
    try {
      return this.driver().profile.refresh_s * 1000;
    } catch {
      return 0;
    }
  }

  private outputsOn(): number | undefined {
    try {
      return this.driver().coilsOn(this.latest());
    } catch {
      return undefined;
    }
  }

  /** The driver, paired (the device is paired first if it has not answered yet), and the action's steps. */
  private async ready(
    action: ActionName,
  ): Promise<{ driver: DeviceDriver; steps: NonNullable<DeviceDriver["profile"]["actions"][ActionName]> }> {
    const driver = this.driver();
    const steps = driver.profile.actions[action];
    if (!steps?.length) throw new SitegateError("DEVICE_NOT_FOUND", `profile ${driver.profile.name} has no ${action} action`);
    if (!driver.paired) await driver.pair(PRIORITY.control);
    return { driver, steps };
  }

  /** A setpoint above the battery's live limit for the direction (its BMS maximum) is written as that limit, never above it. */
  private async setPower(direction: "charge" | "discharge", asked: number): Promise<void> {
    const m = this.latest();
    const limit = direction === "charge" ? m.max_charge_power_w : m.max_discharge_power_w;
    const watts = typeof limit === "number" && limit > 0 ? Math.min(asked, limit) : asked;
    const max = this.descriptor()?.max_power_w;
    await this.act(direction, { watts, ...(max ? { pct: pctOf(watts, max) } : {}) });
    await this.followed(direction, watts, m.power_w);
  }

  /** The profile's `forced_mode` against a reading: undefined without one, or without its metric in the reading. */
  private showsForced(direction: "charge" | "discharge", metrics: Metrics): boolean | undefined {
    let f: DeviceDriver["profile"]["forced_mode"];
    try {
      f = this.driver().profile.forced_mode;
    } catch {
      return undefined; // no driver: nothing to tell from
    }
    const v = f ? metrics[f.metric] : undefined;
    return f && v !== undefined ? f[direction].includes(v) : undefined;
  }

  /**
   * Where the action's registers are write-only (SMA 40236, 40793-40799: each step names its
   * `restore`) and the profile reads nothing back, the write counts once the device's power
   * moves as asked, within the profile's confirm_window_ms; else CONTROL_NOT_CONFIRMED.
   */
  private async followed(direction: "charge" | "discharge", watts: number, before: number | undefined): Promise<void> {
    const driver = this.driver();
    const p = driver.profile;
    const steps = p.actions[direction] ?? [];
    if (p.readback[direction]?.length || !steps.some((s) => s.restore !== undefined)) return;
    const deadline = this.clock.mono() + p.confirm_window_ms;
    for (;;) {
      const m = await driver.readMetrics(CONFIRM_METRICS, PRIORITY.control, 0);
      const w = m.power_w;
      if (w === undefined) return; // no power point: nothing to read the effect from
      this.readings.confirm(this.id, m);
      if (movesAsAsked(direction, watts, w, before)) return;
      const left = deadline - this.clock.mono();
      if (left <= 0)
        throw new SitegateError(
          "CONTROL_NOT_CONFIRMED",
          `${direction} ${Math.round(watts)} W did not take effect within ${p.confirm_window_ms} ms: the power reads ${w} W`,
        );
      await new Promise<void>((r) => this.clock.setTimer(r, Math.min(CONFIRM_POLL_MS, left)));
    }
  }

  /** Plans the action with its values, writes it, and reads back the mode the profile names. */
  private async act(action: ActionName, params: ActionParams): Promise<void> {
    const { driver, steps } = await this.ready(action);
    const writes = await planControlWrites(driver, steps, params);
    if (writes.length === 0)
      throw new SitegateError("DEVICE_NOT_FOUND", `device ${this.id} has none of the registers of its ${action} action`);
    await this.write(driver, writes);
    // The profile's own read-back first (it names the value), then every cell written.
    await driver.readBack(action);
    await this.shows(driver, action, writes);
  }

  /**
   * A write counts once the device shows it (B4): every coil and every readable register
   * written is read back (a write-only register, one whose step names its `restore`, is
   * confirmed by the power instead: followed()), and one that does not read what was
   * written (a relay that acknowledges and does not switch) fails the action with
   * CONTROL_NOT_CONFIRMED.
   */
  private async shows(driver: DeviceDriver, action: ActionName, writes: readonly RawWrite[]): Promise<void> {
    const read = this.reader(driver);
    for (const w of writes) {
      if (w.restore || writeLength(w) === 0) continue;
      const unit = w.unit ?? driver.unit;
      const want = w.table === "coil" ? w.coils.map((c) => (c ? 1 : 0)) : w.words;
      const got = (await read(w.table, w.address, want.length, unit)).map((v) => (w.table === "coil" ? (v ? 1 : 0) : v));
      if (want.some((v, i) => got[i] !== v)) {
        const what = w.table === "coil" ? "coils" : "holding registers";
        const fmt = (xs: readonly number[]) => xs.join(w.table === "coil" ? "" : ",");
        throw new SitegateError(
          "CONTROL_NOT_CONFIRMED",
          `${action} did not take effect: ${what} ${w.address}..${w.address + want.length - 1} of unit ${unit} read ${fmt(got)}, written ${fmt(want)}`,
        );
      }
    }
  }

  async capture(action: ActionName, held?: PreState): Promise<PreState> {
    const { driver, steps } = await this.ready(action);
    const touched = actionCells(driver, steps);
    if (touched.length === 0)
      throw new SitegateError("DEVICE_NOT_FOUND", `device ${this.id} has none of the registers of its ${action} action`);
    return capturePre(touched, asRawWrites(held), this.reader(driver));
  }

  /** The pre-event state written back in reverse order (the mode before the rates, the limit's enable before the limit). */
  async revert(pre: PreState): Promise<void> {
    await this.write(this.driver(), [...asRawWrites(pre)].reverse());
  }

  verify(pre: PreState): Promise<string | undefined> {
    return verifyPre(asRawWrites(pre), this.reader(this.driver()));
  }

  holdsState(pre: PreState): boolean {
    return asRawWrites(pre).length > 0;
  }

  /** The profile's `release` action (back to the device's own control), when it has one. */
  async handBack(): Promise<void> {
    if (!this.driver().profile.actions.release?.length) return;
    await this.act("release", {});
  }

  /**
   * The power point (and its scale factor) in the control lane, no retry: bounded by the device's timeout. A device not paired
   * since the start is paired first (the read before the put-back after a crash, dispatch/gap-readback.ts, comes before the first poll).
   */
  async confirm(): Promise<Metrics> {
    const driver = this.driver();
    if (!driver.paired) await driver.pair(PRIORITY.control);
    const m = await driver.readMetrics(CONFIRM_METRICS, PRIORITY.control, 0);
    this.readings.confirm(this.id, m);
    return m;
  }

  /** Raw reads in the control lane (the pre-event state and its read-back). */
  private reader(driver: DeviceDriver): CellRead {
    const opts = { priority: PRIORITY.control, timeoutMs: driver.timeoutMs, retries: 1 };
    return (table, address, count, unit) => driver.bus.read(unit ?? driver.unit, table, address, count, opts);
  }

  /**
   * Raw writes in the control lane, in order (planWrites merges neighbouring coils); of a
   * setting kept in flash only the registers that hold another value. A write refused after
   * earlier ones went through is a PartialWriteError whose rollback writes those earlier
   * ones back from the ledger's pre-event state (B4: transactional device actions).
   */
  private async write(driver: DeviceDriver, writes: readonly RawWrite[]): Promise<void> {
    const opts = { priority: PRIORITY.control, timeoutMs: driver.timeoutMs };
    const read = this.reader(driver);
    for (const [i, planned] of writes.entries()) {
      const unit = planned.unit ?? driver.unit;
      // A profile writes only to its own device: its unit or a declared sub-device, never broadcast.
      if (unit === 0 || (unit !== driver.unit && !driver.profile.sub_units.includes(unit)))
        throw new SitegateError(
          "CONTROL_VALUE_INVALID",
          `a write to unit ${unit} is refused: not device ${this.id}'s own unit or sub-device`,
        );
      let partOfStep = false;
      try {
        for (const w of await changedOnly(planned, read)) {
          if (w.table === "coil") await driver.bus.writeCoils(unit, w.address, w.coils, opts);
          else await driver.bus.writeRegisters(unit, w.address, w.words, { ...opts, fn: w.words.length === 1 ? 6 : 16 });
          partOfStep = true;
        }
      } catch (e) {
        // A flash step split into runs may have written some of its registers: they go back too.
        const done = writes.slice(0, partOfStep ? i + 1 : i);
        if (done.length === 0) throw e;
        const step = `step ${i + 1} of ${writes.length} (${planned.table} ${planned.address})`;
        throw new PartialWriteError(step, i, (pre) => this.write(driver, [...preOf(done, asRawWrites(pre))].reverse()), e);
      }
    }
  }
}

const positive = (w: unknown): number | undefined => (typeof w === "number" && w > 0 ? w : undefined);
