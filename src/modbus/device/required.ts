// Pairing's check of the points a role cannot do without (DESIGN B9): each required
// point's registers are read once; one that answers exception 2 refuses the pairing by
// the point's name. Silence is the device's (a timeout, retried as before).
import { SitegateError, errorMessage } from "../../errors.js";
import type { ResolvedPoint } from "./decode.js";
import { pointRanges, type UnitRange } from "./point-reads.js";
import { isIllegalAddress } from "./unavailable.js";

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
