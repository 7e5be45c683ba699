// The brand batteries of the dispatch property world (issue 39, item 8): a battery of a
// world may be one of the brand hybrids of hw-sim/models/brands instead of the generic
// SunSpec storage, driven by the gateway through its builtin brand profile (the same
// DeviceDriver and ProfileDevice as on a site, as test/integration/brand-site-clock.test.ts
// drives them), over the world's in-process transport. A hybrid covers its share of the
// house load with its own self-consumption (the model's own loop, `self_use_load_pct`),
// and charges from the surplus of its own PV array. The truth is the model's physics:
// its battery power while a forced mode is set, and its AC output against the shadow's.
// All of it is optional in a WorldSpec: a battery without `brand` runs as before.
import fc from "fast-check";
import type { HybridInverter } from "../../hw-sim/models/brands/hybrid.js";
import { BRANDS, brandRow } from "../../hw-sim/models/brands/index.js";
import { ILLEGAL_ADDRESS, ModbusException } from "../../hw-sim/modbus-pdu.js";
import type { BrandSpec, ScenarioInput } from "../../hw-sim/scenario.js";
import { builtinProfiles } from "../../src/profiles/registry.js";
import type { Profile } from "../../src/profiles/schema.js";

/**
 * The brand batteries a world may have: the rows of the brand table with `world` (a row
 * without says why it is left out; docs/testing.md, "Brand batteries in the world").
 */
export const BRAND_BATTERIES: readonly string[] = BRANDS.filter((r) => "world" in r && r.world).map((r) => r.model);
export type BrandBattery = string;

type DeviceInput = NonNullable<ScenarioInput["ports"]>[number]["devices"][number];

/** A world's battery as far as a brand model needs it. */
export interface BrandBatteryWorld {
  brand?: BrandBattery;
  /** A brand hybrid's own PV array, W at full sun (0 or absent: none). */
  pv_max_w?: number;
  max_power_w: number;
  capacity_wh: number;
  soc_pct: number;
  hybrid?: boolean;
}

/**
 * The scenario device of a brand battery. Its AC rating is its battery's power limit: the
 * profiles of Sungrow, Huawei, GoodWe and Deye take the battery's limit from the AC rating
 * (limits taken from the wrong register), which the world does not set out to show.
 * A hybrid's own self-consumption covers `share_pct` of the house load; one that is not
 * a hybrid covers none (it still charges from its own PV's surplus, as a hybrid does).
 */
export function brandScenarioDevice(
  b: BrandBatteryWorld & { brand: BrandBattery },
  name: string,
  unit: number,
  sharePct: number,
): DeviceInput {
  const common = {
    unit,
    name,
    max_power_w: b.max_power_w,
    capacity_wh: b.capacity_wh,
    soc_pct: b.soc_pct,
    pv_max_w: b.pv_max_w ?? 0,
    self_use_load_pct: b.hybrid ? sharePct : 0,
  };
  const row = brandRow(b.brand);
  const rated = "rated_power_w" in row.schema.shape ? { rated_power_w: b.max_power_w } : {};
  return { ...common, ...row.world, ...rated, model: b.brand } as DeviceInput;
}

export function isBrandSpec(spec: { model: string }): spec is Extract<BrandSpec, { max_power_w: number }> {
  return BRAND_BATTERIES.includes(spec.model);
}

/** The holding registers a brand profile's actions write on the device's own unit, as [address, words], by profile. */
const written = new Map<string, Array<[number, number]>>();
function actionRegisters(profile: string): Array<[number, number]> {
  let regs = written.get(profile);
  if (regs) return regs;
  const found = new Map<number, number>();
  for (const steps of Object.values(builtinProfiles().get(profile).actions))
    for (const s of steps ?? []) {
      if (s.unit !== undefined || s.address === undefined || s.table === "coil") continue;
      const words = ["u32", "s32", "f32", "acc32", "bitfield32"].includes(s.type) ? 2 : s.type.endsWith("64") ? 4 : 1;
      for (let i = 0; i < (s.count ?? 1); i++) found.set(s.address + i * words, words);
    }
  regs = [...found].sort(([a], [b]) => a - b);
  written.set(profile, regs);
  return regs;
}

/**
 * A profile without its pauses in real time (Huawei's gap between requests and wait after
 * connecting): the bus keeps them on the machine's clock, and the world's clock is injected,
 * so they would only make a world slow (a Huawei world took 22 s with them, 0.5 s without).
 */
export function withoutPacing(p: Profile): Profile {
  return p.delay_ms || p.connect_delay_ms ? { ...p, delay_ms: 0, connect_delay_ms: 0 } : p;
}

/** What an event on a brand battery delivers and how it reads, for the world's ground truth. */
export interface BrandTruth {
  max_power_w: number;
  /** Import contribution now, W: minus its AC output (PV plus battery). */
  actual(): number;
  /** Import contribution of the event now: its battery power while a forced mode is set, none in its own mode. */
  own(): number;
  /** Its brand mode and every register the profile may write, to compare with the state before any event. */
  state(): string;
}

/** A register's words, or "write-only" where the model refuses the read (SMA's 40149/40151, exception 2). */
function readable(model: HybridInverter, address: number, count: number): string {
  try {
    return model.readHolding(address, count).join(",");
  } catch (e) {
    if (e instanceof ModbusException && e.code === ILLEGAL_ADDRESS) return "write-only";
    throw e;
  }
}

export function brandTruth(model: HybridInverter, profile: string): BrandTruth {
  const regs = actionRegisters(profile);
  return {
    max_power_w: model.maxW,
    actual: () => -model.acPowerW(),
    own: () => (model.modeName() === "self-consumption" ? 0 : -model.batteryW()),
    state: () => `${model.modeName()} ${regs.map(([a, n]) => `${a}=${readable(model, a, n)}`).join(" ")}`,
  };
}

/**
 * A fault the world does not set on a brand battery, with why. SMA's battery management
 * registers are write-only to the gateway (40236, 40793-40801): a write-back it sent and the
 * device acknowledged without acting on is not seen (its pre-state has nothing to read back,
 * the power has no "as asked" for the device's own mode). Since the field reports the model falls
 * back to its defaults when the six registers are not rewritten within its timeout (60 s),
 * as the hardware does, so an ignored release ends there (the regression world "SMA ...
 * ignored release" in dispatch-property.test.ts passes); a generated world may end before
 * that timeout, so the world still leaves `ignore_writes` off SMA batteries.
 */
export function allowedFault(brand: BrandBattery | undefined, fault: string): boolean {
  return !(brand === "sma-storage" && fault === "ignore_writes");
}

/**
 * Worlds of `arb` whose batteries are each, half the time, one of the brand batteries, with
 * its own PV array (0-6 kW). Shrinks towards the generic SunSpec storage. A fault a brand
 * battery does not get (allowedFault) is left out of its world.
 */
export function withBrandBatteries<W extends { batteries: BrandBatteryWorld[]; faults?: Array<{ device: string; fault: string }> }>(
  arb: fc.Arbitrary<W>,
): fc.Arbitrary<W> {
  return arb.chain((w) => {
    const n = w.batteries.length;
    const brand = fc.oneof(fc.constant(undefined), fc.constantFrom(...BRAND_BATTERIES));
    const pv = fc.integer({ min: 0, max: 6 }).map((k) => k * 1000);
    return fc
      .record({
        brands: fc.array(brand, { minLength: n, maxLength: n }),
        pvs: fc.array(pv, { minLength: n, maxLength: n }),
      })
      .map(({ brands, pvs }) => {
        const out = { ...w, batteries: w.batteries.map((b, i) => (brands[i] ? { ...b, brand: brands[i], pv_max_w: pvs[i]! } : b)) };
        if (!w.faults) return out;
        const faults = w.faults.filter((f) => !f.device.startsWith("bat") || allowedFault(brands[Number(f.device.slice(3)) - 1], f.fault));
        if (faults.length) return { ...out, faults };
        const { faults: _none, ...rest } = out;
        return rest as W;
      });
  });
}
