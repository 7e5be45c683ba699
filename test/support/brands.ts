// The brands site (hw-sim/models/brands/site.ts, built from the brand table) for tests: on
// free ports, and the table's battery brands as the tests drive them (the unit the gateway
// pairs on the shared port, how the device's own registers say its power and mode). Those
// are the simulator's reading of each manufacturer's document, kept apart from the gateway's
// profiles so that a test compares the two readings. A test iterates these; a brand is named
// only where a test is about that brand's own detail.
import { BRANDS, brandRow, type BatteryRegisters } from "../../hw-sim/models/brands/index.js";
import { brandPlacements, brandsScenario } from "../../hw-sim/models/brands/site.js";
import type { ScenarioInput } from "./site.js";

export type { BatteryRegisters } from "../../hw-sim/models/brands/index.js";

/**
 * The brands site with every device on one Modbus TCP port on a free port (no socat), PV
 * off and no load noise. A device whose unit another device of the site also has moves to
 * its row's `shared_unit` (SMA 3 to 30, the EM24 Ethernet 1 to 14). The GX's system unit
 * 100 answers on this shared port as it would on a gateway in front of all of them;
 * identification still names each unit by its own registers.
 */
export function brandsOnTcp(): ScenarioInput {
  const sc = brandsScenario();
  const devices = brandPlacements().map((d) => (d.placement.shared_unit ? { ...d.device, unit: d.placement.shared_unit } : d.device));
  return {
    ...sc,
    control: { listen: "127.0.0.1:0" },
    site: { ...sc.site, load_noise_pct: 0, pv_irradiance: 0 },
    ports: [{ kind: "tcp", listen: "127.0.0.1:0", devices: [...devices, { unit: 20, model: "unknown", name: "stranger" }] }],
  };
}

/** The brands site as it is (the RS-485 bus on a pty, each network device on its own port), on free ports. */
export function brandsSite(): ScenarioInput {
  const sc = brandsScenario();
  return {
    ...sc,
    control: { listen: "127.0.0.1:0" },
    ports: (sc.ports ?? []).map((p) => (p.kind === "rtu" ? { ...p, path: "ttyB", peer: "ttyBGW" } : { ...p, listen: "127.0.0.1:0" })),
  };
}

/** A device of the brands site that its built-in profile reads, as the tests drive it on brandsOnTcp. */
export interface BrandUnit {
  /** The scenario model, and the built-in profile that reads it. */
  model: string;
  kind: "battery" | "meter";
  /** Its scenario device's name. */
  name: string;
  /** The unit the gateway pairs on brandsOnTcp's shared port (the GX's VE.Bus unit for Victron). */
  unit: number;
}

/** Every device of the brands site its profile reads, in table order. */
export const BRAND_UNITS: BrandUnit[] = brandPlacements()
  .filter((d) => d.placement.profile === undefined)
  .map((d) => {
    const row = brandRow(d.model);
    const unit = row.pairedUnit?.(row.schema.parse(d.device)) ?? d.placement.shared_unit ?? d.placement.unit;
    return { model: d.model, kind: d.kind, name: d.placement.name, unit };
  });

/** Every battery brand of the table, at its first device (the one the tests drive), with its own registers' reading. */
export const BATTERY_BRANDS: Array<BrandUnit & BatteryRegisters> = BRANDS.filter((r) => r.battery).map((r) => ({
  ...BRAND_UNITS.find((u) => u.model === r.model)!,
  ...brandRow(r.model).battery!,
}));

/** Battery registers by model. */
export const BATTERY_REGISTERS: Record<string, BatteryRegisters> = Object.fromEntries(BATTERY_BRANDS.map((b) => [b.model, b]));
