// A block of points a device may hold at another base, or not at all (a profile's
// `relocate`): the marker register is read at each shift in turn; the first that holds one
// of the marker's values moves the group's points (value, scale factor, direction, minus)
// by that shift. None: the group's points stay where they are and are unavailable.
import type { FixedProfile } from "../../profiles/schema.js";
import type { ResolvedPoint } from "./decode.js";
import type { UnitRange } from "./point-reads.js";
import { isMissing, type Unavailable } from "./unavailable.js";
import { SitegateError } from "../../errors.js";

function moved(pt: ResolvedPoint, by: number): ResolvedPoint {
  return {
    ...pt,
    address: pt.address + by,
    ...(pt.sf_address === undefined ? {} : { sf_address: pt.sf_address + by }),
    ...(pt.direction ? { direction: { ...pt.direction, address: pt.direction.address + by } } : {}),
    ...(pt.minus ? { minus: { ...pt.minus, address: pt.minus.address + by } } : {}),
  };
}

/** The points with every relocated group at the base the device holds it, and the groups not found marked unavailable. */
export async function relocate(
  p: FixedProfile,
  points: ResolvedPoint[],
  read: (r: UnitRange) => Promise<number[]>,
  unavailable: Unavailable,
): Promise<ResolvedPoint[]> {
  let out = points;
  for (const g of p.relocate) {
    let found: number | undefined;
    let lastError: unknown = new SitegateError("MODBUS_EXCEPTION", `no marker ${g.marker.values.join("/")} at ${g.marker.address}`, {
      details: [{ path: "exception_code", message: "2" }],
    });
    for (const shift of g.shifts) {
      try {
        const [w] = await read({ table: g.marker.table, address: g.marker.address + shift, count: 1 });
        if (w !== undefined && g.marker.values.includes(w)) {
          found = shift;
          break;
        }
      } catch (e) {
        if (!isMissing(e)) throw e;
        lastError = e;
      }
    }
    if (found === undefined) {
      for (const m of g.points) unavailable.mark(m, lastError);
      continue;
    }
    const by = found;
    out = out.map((pt) => (g.points.includes(pt.metric) && by !== 0 ? moved(pt, by) : pt));
  }
  return out;
}
