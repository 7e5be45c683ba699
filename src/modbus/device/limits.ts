// A battery's live charge/discharge limits in W. Some brands publish them in W (Huawei
// 37046/37048, Sungrow 33046/33047, SolarEdge 0xE144/0xE146); others give their BMS's
// current limits in A (Deye 108/109, GoodWe 37004/37005), which are worth current × the
// battery's live voltage (Deye 587, GoodWe 35180).
import type { Metrics } from "../../model/device.js";

/** The readings with `max_charge_power_w` / `max_discharge_power_w` computed from A × V where the device gives only A. */
export function withLimits(m: Metrics): Metrics {
  const v = m.battery_voltage_v;
  if (typeof v !== "number" || v <= 0) return m;
  const charge = m.max_charge_power_w === undefined && typeof m.max_charge_current_a === "number";
  const discharge = m.max_discharge_power_w === undefined && typeof m.max_discharge_current_a === "number";
  if (!charge && !discharge) return m; // nothing to add: no copy (device sync asks per request)
  const out: Metrics = { ...m };
  if (charge) out.max_charge_power_w = Math.round(m.max_charge_current_a! * v);
  if (discharge) out.max_discharge_power_w = Math.round(m.max_discharge_current_a! * v);
  return out;
}
