// SolarEdge StorEdge (an SE inverter with a SolarEdge Home / LG battery), readings over
// SunSpec, battery control over SolarEdge's storage registers.
//
// Documents: SolarEdge "SunSpec Implementation Technical Note" (v2.5) for the SunSpec
// block, and "Power Control Open Protocol for SolarEdge Inverters / StorEdge" application
// note (v2.x) for the storage registers 0xE004..0xE010 and the battery block 0xE100.
// Read from their public quotations in binsentsu/home-assistant-solaredge-modbus
// (const.py, __init__.py) and evcc's solaredge-hybrid template (grid meter scale -1).
//
// Numbering: SolarEdge writes PDU addresses (40000 = "SunS", 0xE004 = 57348); no minus one.
// SunSpec block at 40000: common model 1 with L = 65 (SolarEdge's length, no pad), the
// inverter model 103 at 40069, the meter's common block at 40121 and its model 203 at
// 40188. SolarEdge's meter counts export POSITIVE (the opposite of SunSpec's import).
// Storage block: 32-bit values (U32, F32, U64) LOW word first. Battery instantaneous
// power 0xE174 (F32) is positive while CHARGING.
// Control: Storage Control Mode 0xE004 = 4 (remote control) gives the battery to the
// command mode 0xE00D with the charge limit 0xE00E and discharge limit 0xE010 (F32, W).
// The commands as the application note words them (its list of Charge/Discharge Modes,
// quoted whole in OpenEMS's SolarEdge ESS channel comments and in several public clients),
// with the AC limit L = the inverter's NominalActivePowerLimit or its rated power,
// whichever is lower (here the rated power, `rated_power_w`):
//   0 off;
//   1 "charge excess PV power only": only PV power beyond L charges the battery, which
//     cannot discharge; below L all PV goes to AC (no AC or grid charging);
//   2 "charge from PV first, before producing power to the AC": PV charges up to the
//     charge limit, the rest goes to AC up to L, beyond which PV is curtailed (PV only);
//   3 "charge from PV+AC according to the max battery power": PV first, then AC up to the
//     charge limit (AC only with the AC charge policy 0xE005 set, 1 always allowed);
//   4 "maximize export": AC held at L from PV and the battery (up to the discharge limit);
//     PV beyond L charges the battery;
//   5 discharge to meet the loads, never to the grid; 7 maximize self-consumption.
// The AC output never exceeds L (PV is curtailed). After the command timeout 0xE00B
// (U32, s) without a new command the inverter falls back to the default mode 0xE00A
// ("Storage Charge/Discharge default Mode sets the default mode of operation when Remote
// Control Command Timeout has expired"). Mode 1 of 0xE004 is the inverter's own
// self-consumption. Values not in the document's lists or
// ranges are refused with exception 3; reserved registers inside the storage and battery
// blocks (0xE000..0xE011, 0xE100..0xE19F) read 0, addresses outside them answer 2.
// Meter (`meter`): "default" (common block at 40121, model 203 at 40188); "none" (a
// StorEdge without a SolarEdge meter: the chain ends after the inverter and 40121+ answer
// exception 2); "shift50" / "shift70" (a Synergy inverter, a field report: the
// meter's blocks 50 or 70 registers later). What a Synergy holds in between is not in
// the sources at hand: the model fills it with a vendor-range model (id 64900) of that size.
import { HybridInverter, type HybridSpec, type Target } from "./hybrid.js";
import { RegisterMap, enc, reg, codec, setting } from "./register-map.js";
import { SunSpecImage, type ModelDef } from "../sunspec-image.js";
import { inverter103, meter203 } from "../sunspec-devices.js";
import type { SiteModel } from "../../site-model.js";
import { ModbusException, ILLEGAL_ADDRESS } from "../../modbus-pdu.js";

const LO = "lo-hi" as const;
export const SE_CONTROL = { disabled: 0, maxSelfConsumption: 1, timeOfUse: 2, backupOnly: 3, remote: 4 } as const;
export const SE_COMMAND = {
  off: 0,
  chargePvOnly: 1,
  chargePvFirst: 2,
  chargePvAc: 3,
  maxExport: 4,
  dischargeToLoad: 5,
  maxSelfConsumption: 7,
} as const;
const COMMANDS = new Set<number>(Object.values(SE_COMMAND));

/** The meter's SunSpec models where the StorEdge holds them (none without a meter, after a filler on a Synergy). */
function meterModels(meter: "default" | "none" | "shift50" | "shift70", site: SiteModel, serial: string): ModelDef[] {
  if (meter === "none") return [];
  const shift = meter === "shift50" ? 50 : meter === "shift70" ? 70 : 0;
  const filler: ModelDef[] = shift
    ? [{ id: 64900, length: shift - 2, points: [{ name: "Pad", type: "string", size: shift - 2, get: () => "" }] }]
    : [];
  return [...filler, common65("SolarEdge", "SE-MTR-3Y-400V-A", "Export+Import", "0001", `${serial}-M1`), meter203(site, -1)];
}

function common65(mn: string, md: string, opt: string, vr: string, sn: string): ModelDef {
  return {
    id: 1,
    length: 65,
    points: [
      { name: "Mn", type: "string", size: 16, get: () => mn },
      { name: "Md", type: "string", size: 16, get: () => md },
      { name: "Opt", type: "string", size: 8, get: () => opt },
      { name: "Vr", type: "string", size: 8, get: () => vr },
      { name: "SN", type: "string", size: 16, get: () => sn },
      { name: "DA", type: "uint16", get: () => 1 },
    ],
  };
}

export class SolarEdgeStorEdge extends HybridInverter {
  readonly model = "solaredge-storedge";
  controlMode = SE_CONTROL.maxSelfConsumption as number;
  acChargePolicy = 0;
  acChargeLimit = 0;
  backupReserve = 0;
  defaultMode = SE_COMMAND.maxSelfConsumption as number;
  timeoutS = 3600;
  commandMode = SE_COMMAND.maxSelfConsumption as number;
  commandAt = 0;
  chargeLimitW: number;
  dischargeLimitW: number;
  /** The AC limit L of the commands (the rated power; no NominalActivePowerLimit below it here). */
  readonly ratedW: number;
  private readonly sunspec: SunSpecImage;
  protected readonly input = null;
  protected readonly holding: RegisterMap;

  constructor(spec: HybridSpec & { rated_power_w: number; meter?: "default" | "none" | "shift50" | "shift70" }, site: SiteModel) {
    super(spec, site, "7E1", 5);
    this.ratedW = spec.rated_power_w;
    this.chargeLimitW = spec.max_power_w;
    this.dischargeLimitW = spec.max_power_w;
    const kw = Math.round(spec.rated_power_w / 1000);
    const bat = () => this.batteryW();
    this.sunspec = new SunSpecImage(40000, [
      common65("SolarEdge", `SE${kw}K-RWS48BEN4`, "", "0004.0020.0036", this.serial),
      inverter103({
        powerW: () => this.acPowerW(),
        energyWh: () => this.acOutWh,
        dcW: () => this.pvW() + bat(),
        state: () => 4,
        site,
        tempC: () => 40,
      }),
      ...meterModels(spec.meter ?? "default", site, this.serial),
    ]);
    const f32 = (get: () => number) => reg.ro(2, () => enc.f32(get(), LO));
    const u16 = setting(codec.u16);
    const f32rw = setting(codec.f32(LO));
    const stamp = () => (this.commandAt = site.clock());
    this.holding = new RegisterMap(
      [
        [
          0xe004, // storage control mode
          u16(
            () => this.controlMode,
            (v) => (this.controlMode = v),
            (v) => v <= 4,
          ),
        ],
        [
          0xe005, // AC charge policy
          u16(
            () => this.acChargePolicy,
            (v) => (this.acChargePolicy = v),
            (v) => v <= 3,
          ),
        ],
        [
          0xe006, // AC charge limit
          f32rw(
            () => this.acChargeLimit,
            (v) => (this.acChargeLimit = v),
            (v) => v >= 0,
          ),
        ],
        [
          0xe008, // backup reserved, %
          f32rw(
            () => this.backupReserve,
            (v) => (this.backupReserve = v),
            (v) => v >= 0 && v <= 100,
          ),
        ],
        [
          0xe00a, // charge/discharge default mode
          u16(
            () => this.defaultMode,
            (v) => (this.defaultMode = v),
            (v) => COMMANDS.has(v),
          ),
        ],
        [
          0xe00b, // remote control command timeout, s
          setting(codec.u32(LO))(
            () => this.timeoutS,
            (v) => (this.timeoutS = v),
            (v) => v <= 86400,
          ),
        ],
        [
          0xe00d, // remote control command mode
          u16(
            () => this.commandMode,
            (v) => {
              this.commandMode = v;
              stamp();
            },
            (v) => COMMANDS.has(v),
          ),
        ],
        [
          0xe00e, // charge limit, W
          f32rw(
            () => this.chargeLimitW,
            (v) => (this.chargeLimitW = v),
            (v) => v >= 0 && v <= this.maxW,
          ),
        ],
        [
          0xe010, // discharge limit, W
          f32rw(
            () => this.dischargeLimitW,
            (v) => (this.dischargeLimitW = v),
            (v) => v >= 0 && v <= this.maxW,
          ),
        ],
        [0xe100, reg.ro(16, () => enc.str("SolarEdge", 16))], // battery 1 manufacturer
        [0xe110, reg.ro(16, () => enc.str(`SolarEdge Home Battery ${Math.round(this.capWh / 1000)}kWh`, 16))], // model
        [0xe120, reg.ro(16, () => enc.str("DCDC 1.0.12", 16))], // firmware
        [0xe130, reg.ro(16, () => enc.str(`${this.serial}-B1`, 16))], // serial
        [0xe140, reg.fixed([1])], // device id
        [0xe141, reg.fixed([0])], // reserved
        [0xe142, f32(() => this.capWh)], // rated energy, Wh
        [0xe144, f32(() => this.maxW)], // max charge continuous power, W
        [0xe146, f32(() => this.maxW)], // max discharge continuous power, W
        [0xe148, f32(() => this.maxW * 1.1)], // max charge peak power, W
        [0xe14a, f32(() => this.maxW * 1.1)], // max discharge peak power, W
        [0xe16c, f32(() => 25)], // average temperature, degC
        [0xe16e, f32(() => 27)], // max temperature, degC
        [0xe170, f32(() => this.batteryV())], // instantaneous voltage, V
        [0xe172, f32(() => -bat() / this.batteryV())], // instantaneous current, A (+ = charging)
        [0xe174, f32(() => -bat())], // instantaneous power, W (+ = charging)
        [0xe176, reg.ro(4, () => enc.u64(this.dischargedWh, LO))], // lifetime export energy counter, Wh
        [0xe17a, reg.ro(4, () => enc.u64(this.chargedWh, LO))], // lifetime import energy counter, Wh
        [0xe17e, f32(() => this.capWh)], // max energy, Wh
        [0xe180, f32(() => (this.capWh * this.soc) / 100)], // available energy, Wh
        [0xe182, f32(() => 100)], // state of health, %
        [0xe184, f32(() => this.soc)], // state of energy, %
        [0xe186, reg.ro(2, () => enc.u32(bat() < 0 ? 3 : bat() > 0 ? 4 : 7, LO))], // status: 3 charge, 4 discharge, 7 idle
      ],
      {
        blocks: [
          [0xe000, 0xe011],
          [0xe100, 0xe19f],
        ],
      },
    );
  }

  batteryV(): number {
    return 380 + this.soc * 0.4;
  }

  /** PV and battery at the AC, never above the AC limit (PV beyond it is curtailed). */
  override acPowerW(): number {
    return Math.min(this.ratedW, super.acPowerW());
  }

  override readHolding(address: number, count: number): number[] {
    if (address >= 40000 && address < this.sunspec.end) {
      this.site.advance();
      return this.sunspec.read(address, count);
    }
    if (address >= 40000 && address < 0xe000) throw new ModbusException(ILLEGAL_ADDRESS);
    return super.readHolding(address, count);
  }

  protected override tick(nowMs: number): void {
    if (this.controlMode === SE_CONTROL.remote && this.commandMode !== this.defaultMode && nowMs - this.commandAt > this.timeoutS * 1000) {
      this.commandMode = this.defaultMode;
    }
  }

  private command(mode: number): Target {
    const pv = this.pvW();
    const pvOnly = Math.min(pv, this.chargeLimitW);
    const fromAc = this.acChargePolicy !== 0;
    switch (mode) {
      case SE_COMMAND.chargePvOnly: // only the PV beyond the AC limit
        return { mode: "forced", w: 0 - Math.min(this.chargeLimitW, Math.max(0, pv - this.ratedW)) };
      case SE_COMMAND.chargePvFirst: // PV only, the battery before the AC
        return { mode: "forced", w: 0 - pvOnly };
      case SE_COMMAND.chargePvAc:
        return { mode: "forced", w: -(fromAc ? this.chargeLimitW : pvOnly) };
      case SE_COMMAND.maxExport: // the AC at its limit: the battery makes up what the PV lacks, takes what exceeds it
        return {
          mode: "forced",
          w: Math.max(-this.chargeLimitW, Math.min(this.dischargeLimitW, this.ratedW - pv)),
          minSoc: this.backupReserve,
        };
      case SE_COMMAND.dischargeToLoad:
        return { mode: "self-consumption", maxChargeW: 0, maxDischargeW: this.dischargeLimitW, minSoc: this.backupReserve };
      case SE_COMMAND.maxSelfConsumption:
        return { mode: "self-consumption", maxChargeW: this.chargeLimitW, maxDischargeW: this.dischargeLimitW, minSoc: this.backupReserve };
      default:
        return { mode: "idle" };
    }
  }

  protected target(): Target {
    switch (this.controlMode) {
      case SE_CONTROL.remote:
        return this.command(this.commandMode);
      case SE_CONTROL.maxSelfConsumption:
      case SE_CONTROL.timeOfUse:
        return { mode: "self-consumption", minSoc: this.backupReserve };
      default:
        return { mode: "idle" };
    }
  }
}
