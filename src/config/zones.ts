// Time zones the daemon can run its jobs in. One check for the schema (so check-config
// refuses what run would) and for the maintenance schedule that sets TZ from it.
import { existsSync, statSync } from "node:fs";
import { join } from "node:path";

/** Where Debian's tzdata keeps the zones; TZ names a file under it. */
export const ZONEINFO = "/usr/share/zoneinfo";

/** Why `tz` cannot be the daemon's TZ ("local" and "UTC" always can), or null. */
export function zoneProblem(tz: string): string | null {
  if (tz === "local" || tz === "UTC") return null;
  const file = join(ZONEINFO, tz);
  // An unknown zone would silently be UTC: refuse it.
  if (tz.includes("..") || !existsSync(file) || !statSync(file).isFile()) return `no such zone in ${ZONEINFO}`;
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: tz });
  } catch {
    return "not a time zone the runtime knows";
  }
  return null;
}
