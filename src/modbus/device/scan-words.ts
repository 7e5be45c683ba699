// A scan's answers in an installer's words, the same on the terminal (`sitegate scan`) and
// on the status page: what each unit is ("unit 1: SunSpec inverter (profile sunspec)"), or
// that it answers and no profile knows it. How it answered (registers, an exception) is a
// detail for the tooltip and --json, not the news: a device that answers exception 2 to
// register 0 is there all the same.
import type { ProfileRegistry } from "../../profiles/registry.js";
import type { ScanHit } from "../../model/commissioning.js";
import type { ProfileMatch } from "./identify.js";

/** A SunSpec device by the role its models give it. */
const SUNSPEC_ROLE_WORDS: Record<string, string> = {
  battery: "SunSpec battery inverter",
  pv: "SunSpec inverter",
  meter: "SunSpec meter",
};

/** What a profile's device is, short: its description up to the first comma or parenthesis. */
function whatItIs(m: ProfileMatch, profiles: ProfileRegistry): string {
  if (!profiles.has(m.profile)) return m.profile;
  const p = profiles.get(m.profile);
  if (p.kind === "sunspec") return SUNSPEC_ROLE_WORDS[m.identity.role ?? ""] ?? "SunSpec device";
  return p.description.split(/ \(|, /)[0]?.trim() || m.profile;
}

/**
 * One unit of a scan in words. `matches` undefined: the scan did not identify (the unit
 * answers, that is all it knows); empty: no profile knows the device.
 */
export function scanWords(hit: ScanHit, matches: ProfileMatch[] | undefined, profiles: ProfileRegistry): string {
  const unit = `unit ${hit.unit}`;
  if (matches === undefined) return `${unit}: answers`;
  if (matches.length === 0) return `${unit}: answers, not a known device`;
  const names = matches.map((m) => m.profile).join(" or ");
  return `${unit}: ${[...new Set(matches.map((m) => whatItIs(m, profiles)))].join(" or ")} (profile ${names})`;
}
