// Which profile a device is: each profile names what identifies its device (an identity
// register with an expected value, a string prefix, a model-code range; SunSpec: the
// "SunS" marker). A device that merely answers matches nothing. Used by `scan --identify`.
import { SitegateError, errorMessage } from "../../errors.js";
import { PRIORITY, type Bus } from "../bus.js";
import { decodeRaw, typeRegs } from "../codec.js";
import { sunSpecChain } from "./sunspec-chain.js";
import type { ProfileRegistry } from "../../profiles/registry.js";
import type { FixedProfile, IdentityRegister, Profile, SunSpecProfile } from "../../profiles/schema.js";

/** What one identity register reads: a number or a string, or the read's error. */
export type IdentityReading = { value: number | string } | { error: string };

export interface ProfileMatch {
  profile: string;
  /** The identity read (name -> value), shown with the match. */
  identity: Record<string, string>;
}

/** Whether a reading satisfies a register's expectation (a register without one identifies nothing). */
export function expectationHolds(r: IdentityRegister, value: number | string): boolean {
  const e = r.expect;
  if (!e) return false;
  if (e.prefix) return typeof value === "string" && e.prefix.some((p) => value.startsWith(p));
  if (typeof value !== "number") return false;
  if (e.values) return e.values.includes(value);
  return (e.ranges ?? []).some(([lo, hi]) => value >= lo && value <= hi);
}

/**
 * Whether these readings identify the profile's device: it names at least one expectation,
 * and every register with one answered and holds it. Pure.
 */
export function identityMatches(registers: readonly IdentityRegister[], readings: ReadonlyMap<string, IdentityReading>): boolean {
  const expected = registers.filter((r) => r.expect);
  if (expected.length === 0) return false;
  return expected.every((r) => {
    const got = readings.get(r.name);
    return got !== undefined && "value" in got && expectationHolds(r, got.value);
  });
}

/** Profiles that can identify a device at all, the specific ones (fixed maps) before the generic SunSpec one. */
export function identifiable(profiles: readonly Profile[]): Profile[] {
  const fixed = profiles.filter((p): p is FixedProfile => p.kind === "fixed" && p.identity.some((r) => r.expect));
  return [...fixed, ...profiles.filter((p) => p.kind === "sunspec")];
}

const SUNS = [0x5375, 0x6e53];

async function readFixed(bus: Bus, unit: number, p: FixedProfile, timeoutMs: number): Promise<Map<string, IdentityReading>> {
  const out = new Map<string, IdentityReading>();
  for (const r of p.identity) {
    try {
      // A profile whose device wakes slowly after a connect (a Huawei) is probed after that wait.
      const words = await bus.read(r.unit ?? unit, r.table, r.address, typeRegs(r.type, r.length), {
        priority: PRIORITY.scan,
        timeoutMs,
        retries: 0,
        connectDelayMs: p.connect_delay_ms,
      });
      const value = decodeRaw(r.type, words, r.word_order);
      out.set(r.name, { value });
      if (r.expect && !expectationHolds(r, value)) break; // decided: not this profile
    } catch (e) {
      out.set(r.name, { error: errorMessage(e) });
      if (r.expect) break; // an expectation that cannot be read already decides: no match
    }
  }
  return out;
}

async function hasSunSpecMarker(bus: Bus, unit: number, bases: readonly number[], timeoutMs: number): Promise<number | null> {
  for (const b of bases) {
    try {
      const w = await bus.read(unit, "holding", b, 2, { priority: PRIORITY.scan, timeoutMs, retries: 0 });
      if (w[0] === SUNS[0] && w[1] === SUNS[1]) return b;
    } catch {
      // no marker at this base
    }
  }
  return null;
}

/**
 * What a SunSpec device is (battery, pv, meter) by the first of the profile's role rules
 * whose models it has: one header read per model along the chain. Undefined when the chain
 * cannot be read or no rule matches.
 */
async function sunspecRole(bus: Bus, unit: number, p: SunSpecProfile, base: number, timeoutMs: number): Promise<string | undefined> {
  const ids = new Set<number>();
  try {
    const read = (addr: number, count: number) =>
      bus.read(unit, "holding", addr, count, { priority: PRIORITY.scan, timeoutMs, retries: 0 });
    for await (const m of sunSpecChain(unit, base, read)) ids.add(m.id);
  } catch {
    // the models read so far decide
  }
  return p.roles.find((r) => r.models.every((m) => ids.has(m)))?.role;
}

/**
 * Every profile whose identity the device at `unit` holds. A device a specific (fixed-map)
 * profile names is that profile's, not also the generic SunSpec one's: a SolarEdge
 * StorEdge carries the SunSpec marker but is dispatched through its own registers.
 */
export async function identifyUnit(bus: Bus, unit: number, profiles: ProfileRegistry, timeoutMs: number): Promise<ProfileMatch[]> {
  const out: ProfileMatch[] = [];
  for (const p of identifiable(profiles.names().map((n) => profiles.get(n)))) {
    if (p.kind === "sunspec") {
      if (out.length > 0) continue;
      const base = await hasSunSpecMarker(bus, unit, p.bases, timeoutMs);
      if (base === null) continue;
      const role = await sunspecRole(bus, unit, p, base, timeoutMs);
      out.push({ profile: p.name, identity: { sunspec_base: String(base), ...(role ? { role } : {}) } });
      continue;
    }
    const readings = await readFixed(bus, unit, p, timeoutMs);
    if (!identityMatches(p.identity, readings)) continue;
    const identity: Record<string, string> = {};
    for (const [k, v] of readings) if ("value" in v) identity[k] = String(v.value);
    out.push({ profile: p.name, identity });
  }
  return out;
}

/**
 * DEVICE_MISMATCH (another device answered) naming the identity register, the value read and
 * what the profile expects; a register that is one of the profile's `enums` (a Victron's
 * ess_mode) names each value too, so that an installer reads which mode to set.
 */
export function identityMismatch(
  r: IdentityRegister,
  value: number | string,
  unit: number,
  enums: Readonly<Record<string, Readonly<Record<string, number>>>> = {},
): SitegateError {
  const e = r.expect!;
  const names = enums[r.name] ?? {};
  const named = (v: number | string) => {
    const label = Object.entries(names).find(([, x]) => x === v)?.[0];
    return label === undefined ? JSON.stringify(v) : `${v} (${label})`;
  };
  const want = e.prefix
    ? `text starting ${e.prefix.map((x) => JSON.stringify(x)).join(" or ")}`
    : e.values
      ? `one of ${e.values.map(named).join(", ")}`
      : `within ${(e.ranges ?? []).map(([lo, hi]) => `${lo}..${hi}`).join(", ")}`;
  return new SitegateError(
    "DEVICE_MISMATCH",
    `identity register ${r.name} (${r.table} ${r.address}, unit ${unit}) reads ${named(value)}, the profile expects ${want}`,
  );
}
