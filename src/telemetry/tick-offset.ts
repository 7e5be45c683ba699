// Where in the poll interval a site's ticks fall. Every site polls on its own stable offset
// from the UTC interval grid, derived from its site_id, so that a fleet of NTP-synced
// gateways spreads its polls (and its telemetry to the broker) over the interval instead
// of all reading and publishing in the same few hundred ms. docs/telemetry.md ("Poller").
import { createHash } from "node:crypto";

/** A stable offset in [0, intervalMs) for `siteId`: the same on every start and every release. */
export function tickOffsetMs(siteId: string, intervalMs: number): number {
  const h = createHash("sha256").update(siteId, "utf8").digest();
  return h.readUInt32BE(0) % intervalMs;
}

/** The first tick instant at or after `now` on the grid of `intervalMs` shifted by `offsetMs`. */
export function nextTickAt(now: number, intervalMs: number, offsetMs: number): number {
  return Math.ceil((now - offsetMs) / intervalMs) * intervalMs + offsetMs;
}
