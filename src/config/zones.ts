// Time zones the nightly maintenance can run in. One check for the schema (so check-config
// refuses what run would) and for the maintenance schedule, which computes its times in
// the zone through Intl and never sets the process's TZ.

/** Why `tz` cannot be the maintenance zone ("local" and "UTC" always can), or null. */
export function zoneProblem(tz: string): string | null {
  if (tz === "local" || tz === "UTC") return null;
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: tz });
  } catch {
    // An unknown zone must not silently become UTC: refuse it.
    return "not an IANA time zone the runtime knows (e.g. Europe/Berlin)";
  }
  return null;
}
