// Victron GX device (Cerbo GX, CCGX, Venus OS) in front of a MultiPlus/Quattro (VE.Bus)
// with its battery, in an ESS installation.
//
// Document: Victron "CCGX-Modbus-TCP-register-list" (the xlsx of
// victronenergy/dbus_modbustcp, revision 3.x): sheet "Field list" for the registers,
// sheet "Unit ID mapping" for the unit ids; with the "ESS mode 2 and 3" manual.
// Read from its public quotations in optio50/Victron_Modbus_TCP (MODBUS_Example.py:
// system unit 100, MultiPlus 227, function 4 reads, 842/841/820/817/2700/2900..2903,
// VE.Bus 3/6/9/15/18/21/31/32/64) and the register extracts in public GX client
// scripts (2902 ESS mode, vebus 37 AcPowerSetpoint, 38/39 disable charge / feed-in),
// with Victron's "ESS mode 2 and 3" page (the mode-3 setpoint is the power at the AC
// input: positive takes power from the grid).
//
// Numbering: the list gives PDU addresses; no minus one. Each D-Bus service is its own
// unit id: com.victronenergy.system, .settings and .hub4 on unit 100, the VE.Bus
// inverter/charger on its own unit (227 on a CCGX's VE.Bus port, `vebus_unit` here).
// A unit id without a service answers exception 0x0B (gateway target failed), as the GX does.
// Word order: HIGH word first; most values are 16-bit with a scale in the list.
// Function 3 and 4 read the same registers.
// Signs: battery power (unit 100, 842) is positive while CHARGING; grid L1..L3
// (820..822) positive while importing; the ESS setpoints are in the grid's direction:
// 2700 (grid setpoint) positive = import, vebus 37 positive = power INTO the Multi,
// i.e. charging.
// Control: ESS mode 2902 (1 optimised with phase compensation, 2 without, 3 external
// control). In modes 1 and 2 the GX's loop holds the grid at the setpoint 2700 within
// the max charge / inverter percentages 2701/2702. In mode 3 the battery follows vebus
// 37 (W), with 38/39 disabling charge / feed-in; the Multi drops the mode-3 setpoint to
// zero when it is not refreshed within 60 s. The loop of modes 1 and 2 holds the GRID at
// 2700: the battery makes up the house load's share on top, so the house load moves it; in
// mode 3 the Multi's AC input follows 37 (the house loads here sit beside it on the grid
// side, none on its AC output), so the battery power is 37 whatever the load. DisableFeedIn
// (39) stops feed-in to the grid, not discharge: the battery still covers the house load's
// share, never more (Victron's "ESS mode 2 and 3" page, "DisableFeedIn": "the Multi will
// not feed in to the grid", loads are still powered from the battery). 2700 is a setting
// of com.victronenergy.settings (the GX keeps it in flash); 37 is volatile. `ess_mode` in
// the scenario is the mode the installer set (default 1). Values outside a setting's range are
// refused with exception 3. A register of the list that this site does not have (no
// genset, no second input) reads 0 inside the service's block (system 800..850, hub4
// and settings 2700..2720 and 2900..2910, VE.Bus 3..70); beyond, exception 2.
import { HybridInverter, type HybridSpec, type Target } from "./hybrid.js";
import { RegisterMap, enc, reg, codec, setting, type RegDef } from "./register-map.js";
import type { DeviceView } from "../device.js";
import { TableDevice } from "./table-device.js";
import type { SiteModel } from "../../site-model.js";

export const VICTRON_ESS_MODE = { withPhaseCompensation: 1, withoutPhaseCompensation: 2, external: 3 } as const;
const SETPOINT_WATCHDOG_MS = 60_000;

export class VictronGx extends HybridInverter {
  readonly model = "victron-gx";
  essMode = VICTRON_ESS_MODE.withPhaseCompensation as number;
  gridSetpointW = 50;
  maxChargePct = 100;
  maxInverterPct = 100;
  dvccMaxChargeA = -1;
  vebusSetpointW = 0;
  vebusSetpointAt = 0;
  disableCharge = 0;
  disableFeedIn = 0;
  switchPosition = 3;
  minSocPct = 10;
  readonly vebus: VictronVebus;
  protected readonly holding: RegisterMap;
  protected get input(): RegisterMap {
    return this.holding;
  }

  constructor(spec: HybridSpec & { vebus_unit: number; ess_mode?: number }, site: SiteModel) {
    super(spec, site, "c0619a", 6);
    this.essMode = spec.ess_mode ?? VICTRON_ESS_MODE.withPhaseCompensation;
    const bat = () => this.batteryW();
    const s16rw = setting(codec.s16);
    const phase = (w: number) => w / 3;
    this.holding = new RegisterMap(
      [
        [800, reg.ro(6, () => enc.str(this.serial, 6))], // com.victronenergy.system /Serial
        [817, reg.ro(1, () => enc.u16(phase(site.baseLoadW())))], // AC consumption L1, W
        [818, reg.ro(1, () => enc.u16(phase(site.baseLoadW())))], // AC consumption L2, W
        [819, reg.ro(1, () => enc.u16(phase(site.baseLoadW())))], // AC consumption L3, W
        [820, reg.ro(1, () => enc.s16(phase(site.grid())))], // grid L1, W (+ = import)
        [821, reg.ro(1, () => enc.s16(phase(site.grid())))], // grid L2, W
        [822, reg.ro(1, () => enc.s16(phase(site.grid())))], // grid L3, W
        [840, reg.ro(1, () => enc.u16(this.batteryV() * 10))], // battery voltage, 0.1 V
        [841, reg.ro(1, () => enc.s16((-bat() / this.batteryV()) * 10))], // battery current, 0.1 A (+ = charging)
        [842, reg.ro(1, () => enc.s16(-bat()))], // battery power, W (+ = charging)
        [843, reg.ro(1, () => enc.u16(this.soc))], // battery state of charge, %
        [844, reg.ro(1, () => [bat() < 0 ? 1 : bat() > 0 ? 2 : 0])], // battery state: 0 idle, 1 charging, 2 discharging
        [850, reg.ro(1, () => enc.u16(this.pvW()))], // PV DC-coupled power, W
        [2900, reg.ro(1, () => [this.soc >= this.minSocPct ? 10 : 11])], // ESS BatteryLife state: 10 self-consumption at or above min SOC, 11 below
        [
          2901, // ESS minimum SOC (unless grid fails), 0.1 %
          s16rw(
            () => this.minSocPct * 10,
            (v) => (this.minSocPct = v / 10),
            (v) => v >= 0 && v <= 1000,
          ),
        ],
        [2903, reg.ro(1, () => enc.u16(this.minSocPct * 10))], // ESS BatteryLife SOC limit, 0.1 %
        [
          2700, // ESS control loop setpoint, W
          s16rw(
            () => this.gridSetpointW,
            (v) => (this.gridSetpointW = v),
            () => true,
          ),
        ],
        [
          2701, // ESS max charge, %
          s16rw(
            () => this.maxChargePct,
            (v) => (this.maxChargePct = v),
            (v) => v >= 0 && v <= 100,
          ),
        ],
        [
          2702, // ESS max inverter power, %
          s16rw(
            () => this.maxInverterPct,
            (v) => (this.maxInverterPct = v),
            (v) => v >= 0 && v <= 100,
          ),
        ],
        [
          2705, // DVCC max charge current, A (-1 off)
          s16rw(
            () => this.dvccMaxChargeA,
            (v) => (this.dvccMaxChargeA = v),
            (v) => v >= -1,
          ),
        ],
        [
          2902, // ESS mode (Hub4Mode)
          s16rw(
            () => this.essMode,
            (v) => (this.essMode = v),
            (v) => v >= 1 && v <= 3,
          ),
        ],
      ],
      {
        blocks: [
          [800, 850],
          [2700, 2720],
          [2900, 2910],
        ],
      },
    );
    this.vebus = new VictronVebus(`${spec.name}.vebus`, spec.vebus_unit, this, site, s16rw);
  }

  batteryV(): number {
    return 50 + this.soc * 0.05;
  }

  protected override tick(nowMs: number): void {
    if (this.vebusSetpointW !== 0 && nowMs - this.vebusSetpointAt > SETPOINT_WATCHDOG_MS) this.vebusSetpointW = 0;
  }

  protected target(): Target {
    const maxCharge = this.disableCharge ? 0 : (this.maxW * this.maxChargePct) / 100;
    const inverter = (this.maxW * this.maxInverterPct) / 100;
    // No feed-in: the battery covers the house load's share (less the PV's), not the grid.
    const maxDischarge = this.disableFeedIn ? Math.min(inverter, Math.max(0, this.loadShareW() - this.pvW())) : inverter;
    if (this.essMode === VICTRON_ESS_MODE.external) {
      // No setpoint (never written, released, or dropped by the timeout): the Multi idles.
      if (this.vebusSetpointW === 0) return { mode: "idle" };
      const w = -this.vebusSetpointW;
      return { mode: "forced", w: Math.max(-maxCharge, Math.min(maxDischarge, w)) };
    }
    // The GX's loop: the battery makes up the difference between the load and the grid setpoint.
    const w = this.loadShareW() - this.pvW() - this.gridSetpointW;
    return { mode: "self-consumption", maxChargeW: maxCharge, maxDischargeW: maxDischarge, w, minSoc: this.minSocPct };
  }

  override view(): DeviceView {
    return { ...super.view(), ess_mode: this.essMode, grid_setpoint_w: this.gridSetpointW, vebus_unit: this.vebus.unit };
  }
}

/** The VE.Bus inverter/charger service of the GX, on its own unit id; its state is the GX's. */
export class VictronVebus extends TableDevice {
  readonly model = "victron-gx-vebus";
  private readonly map: RegisterMap;

  constructor(
    name: string,
    unit: number,
    private readonly gx: VictronGx,
    protected readonly site: SiteModel,
    s16rw: (get: () => number, set: (v: number) => void, ok: (v: number) => boolean) => RegDef,
  ) {
    super(name, unit);
    const bat = () => gx.batteryW();
    const u16rw = setting(codec.u16);
    this.map = new RegisterMap(
      [
        [3, reg.ro(1, () => enc.u16(site.voltage_v * 10))], // input voltage L1, 0.1 V
        [6, reg.ro(1, () => enc.s16((-bat() / site.voltage_v) * 10))], // input current L1, 0.1 A
        [9, reg.ro(1, () => enc.s16(site.frequency_hz * 100))], // input frequency L1, 0.01 Hz
        [12, reg.ro(1, () => enc.s16(-bat() / 10))], // input power L1, 10 W (+ = taken from the input)
        [15, reg.ro(1, () => enc.u16(site.voltage_v * 10))], // output voltage L1, 0.1 V
        [18, reg.fixed([0])], // output current L1, 0.1 A (no loads on the AC output here)
        [21, reg.ro(1, () => enc.s16(site.frequency_hz * 100))], // output frequency, 0.01 Hz
        [26, reg.ro(1, () => enc.u16(gx.batteryV() * 100))], // battery voltage, 0.01 V
        [27, reg.ro(1, () => enc.s16((-bat() / gx.batteryV()) * 10))], // battery current, 0.1 A (+ = charging)
        [30, reg.ro(1, () => enc.u16(gx.soc * 10))], // VE.Bus state of charge, 0.1 %
        [31, reg.ro(1, () => [bat() < 0 ? 3 : bat() > 0 ? 9 : 8])], // VE.Bus state: 3 bulk, 8 passthru, 9 inverting
        [32, reg.fixed([0])], // VE.Bus error: 0 none
        [
          33, // switch position
          u16rw(
            () => gx.switchPosition,
            (v) => (gx.switchPosition = v),
            (v) => v >= 1 && v <= 4,
          ),
        ],
        [
          37, // ESS power setpoint phase 1, W (+ = into the Multi)
          s16rw(
            () => gx.vebusSetpointW,
            (v) => {
              gx.vebusSetpointW = v;
              gx.vebusSetpointAt = site.clock();
            },
            () => true,
          ),
        ],
        [
          38, // ESS disable charge flag
          u16rw(
            () => gx.disableCharge,
            (v) => (gx.disableCharge = v),
            (v) => v <= 1,
          ),
        ],
        [
          39, // ESS disable feedback flag
          u16rw(
            () => gx.disableFeedIn,
            (v) => (gx.disableFeedIn = v),
            (v) => v <= 1,
          ),
        ],
        [64, reg.fixed([0])], // grid lost alarm: 0 ok
      ],
      { blocks: [[3, 70]] },
    );
  }

  protected tableOf(): RegisterMap {
    return this.map;
  }

  view(): DeviceView {
    return { power_w: this.gx.view().power_w, part_of: this.gx.name };
  }
}
