// Pairing's check of the points a role cannot do without (DESIGN B9): each required
// point's registers are read once; one that answers exception 2 refuses the pairing by
// the point's name. Silence is the device's (a timeout, retried as before). A SunSpec
// device's points come from the models it lists: a role's point that none of them gives
// (a storage device that lists model 124 but no inverter model, so no AC power) refuses
// the pairing by the point's name and the models that would give it.
import { SitegateError, errorMessage } from "../../errors.js";
import type { Role } from "../../model/roles.js";
import type { SunSpecProfile } from "../../profiles/schema.js";
import { decodePoints, tableKey, type Registers, type ResolvedPoint } from "./decode.js";
import { pointRanges, type UnitRange } from "./point-reads.js";
import { isIllegalAddress, isRequired, ROLE_MINIMUM } from "./unavailable.js";

export async function requireAnswers(
  profile: string,
  points: readonly ResolvedPoint[],
  unit: number,
  read: (b: UnitRange) => Promise<unknown>,
): Promise<void> {
  for (const pt of points) {
    if (!pt.required) continue;
    for (const r of pointRanges(pt)) {
      try {
        await read(r);
      } catch (e) {
        if (!isIllegalAddress(e)) throw e;
        throw new SitegateError(
          "PAIRING_FAILED",
          `unit ${r.unit ?? unit} lacks ${pt.metric}, which profile ${profile} requires (${r.table} register ${r.address}): ${errorMessage(e)}`,
          { details: [{ path: `points.${pt.metric}`, message: "required point does not answer" }], cause: e },
        );
      }
    }
  }
}

/**
 * A SunSpec device's points for its role: one per metric, the role's minimum and the
 * profile's marked points required. Of a metric in two models (soc in 124 and 802) the first model listed wins;
 * of a required one, the first whose registers read a value ("not implemented" is SunSpec's
 * word for a point the device does not have). A required metric that no model of the
 * device gives, or that every model giving it reads as not implemented, refuses the
 * pairing by name.
 */
export async function sunSpecRolePoints(
  p: SunSpecProfile,
  role: Role,
  models: readonly number[],
  points: readonly ResolvedPoint[],
  unit: number,
  read: (b: UnitRange) => Promise<number[]>,
): Promise<ResolvedPoint[]> {
  const out: ResolvedPoint[] = [];
  for (const metric of new Set(points.map((pt) => pt.metric))) {
    const candidates = points.filter((pt) => pt.metric === metric);
    if (
      !isRequired(
        role,
        metric,
        candidates.some((pt) => pt.required),
      )
    ) {
      out.push({ ...candidates[0]!, required: false });
      continue;
    }
    const chosen = await firstImplemented(p.name, candidates, unit, read);
    out.push({ ...chosen, required: true });
  }
  for (const metric of ROLE_MINIMUM[role] ?? []) {
    if (out.some((pt) => pt.metric === metric)) continue;
    const givers = Object.entries(p.models)
      .filter(([, pts]) => pts.some((pt) => pt.metric === metric))
      .map(([id]) => id);
    throw new SitegateError(
      "PAIRING_FAILED",
      `unit ${unit} lacks ${metric}, which a ${role} requires: the SunSpec device lists models ${models.join(", ")}, ` +
        `and profile ${p.name} reads ${metric} from model ${givers.join(", ") || "(none)"}`,
      { details: [{ path: `points.${metric}`, message: "required point is in none of the device's models" }] },
    );
  }
  return out;
}

/** The first of a required metric's points whose registers read a value; none: PAIRING_FAILED by name. */
async function firstImplemented(
  profile: string,
  candidates: readonly ResolvedPoint[],
  unit: number,
  read: (b: UnitRange) => Promise<number[]>,
): Promise<ResolvedPoint> {
  const why: string[] = [];
  for (const pt of candidates) {
    const data: Registers = new Map();
    try {
      for (const r of pointRanges(pt)) {
        const words = await read(r);
        const key = tableKey(r.unit ?? unit, r.table);
        const t = data.get(key) ?? new Map<number, number>();
        words.forEach((w, i) => t.set(r.address + i, w));
        data.set(key, t);
      }
    } catch (e) {
      if (!isIllegalAddress(e)) throw e; // silence is the device's
      why.push(`register ${pt.address} answers ${errorMessage(e)}`);
      continue;
    }
    if (pt.metric in decodePoints([pt], () => true, data, unit)) return pt;
    why.push(`register ${pt.address} reads "not implemented"`);
  }
  const metric = candidates[0]!.metric;
  throw new SitegateError("PAIRING_FAILED", `unit ${unit} lacks ${metric}, which profile ${profile} requires: ${why.join("; ")}`, {
    details: [{ path: `points.${metric}`, message: "required point is not implemented" }],
  });
}
