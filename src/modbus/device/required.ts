// Pairing's check of the points a role cannot do without (DESIGN B9): each required
// point's registers are read once; one that answers exception 2 refuses the pairing by
// the point's name. Silence is the device's (a timeout, retried as before). A SunSpec
// device's points come from the models it lists: a role's point that none of them gives
// (a storage device that lists model 124 but no inverter model, so no AC power) refuses
// the pairing by the point's name and the models that would give it.
import { SitegateError, errorMessage } from "../../errors.js";
import type { Role } from "../../model/roles.js";
import type { SunSpecProfile } from "../../profiles/schema.js";
import type { ResolvedPoint } from "./decode.js";
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
 * A SunSpec device's points for its role: one per metric (a metric in two models, soc in
 * 124 and 802: the first model listed wins), the role's minimum marked required. A metric
 * of the role's minimum that no model of the device gives refuses the pairing by name.
 */
export function sunSpecRolePoints(
  p: SunSpecProfile,
  role: Role,
  models: readonly number[],
  points: readonly ResolvedPoint[],
  unit: number,
): ResolvedPoint[] {
  const seen = new Set<string>();
  const out = points
    .filter((pt) => (seen.has(pt.metric) ? false : (seen.add(pt.metric), true)))
    .map((pt) => ({ ...pt, required: isRequired(role, pt.metric, false) }));
  for (const metric of ROLE_MINIMUM[role] ?? []) {
    if (seen.has(metric)) continue;
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
