// The names of a point's values, as people read them: a state from the profile's `enums`
// ("standby", "holding"), a relay's coils ("coils 1:on 2:on 3:off 4:off"). One source for
// every place that prints a reading: `sitegate read`, the demo's table, the status page.
import type { Profile } from "./schema.js";

/** A bit mask of `n` coils in words, coil 1 = bit 0: "coils 1:on 2:off". */
export function coilsWords(mask: number, n: number): string {
  return "coils " + Array.from({ length: n }, (_, i) => `${i + 1}:${Math.floor(mask / 2 ** i) % 2 ? "on" : "off"}`).join(" ");
}

/** An enum's name as words: `shutting_down` reads "shutting down". */
function words(name: string): string {
  return name.replace(/_/g, " ");
}

/** The enum a point of the profile names for `metric`, and whether it is a coil bit mask (and of how many). */
function pointOf(p: Profile, metric: string): { enum?: string; coils?: number } | undefined {
  if (p.kind === "fixed") {
    const pt = p.points.find((x) => x.metric === metric);
    return pt && (pt.bitmask ? { coils: pt.length ?? 1 } : { enum: pt.enum });
  }
  for (const pts of Object.values(p.models)) {
    const pt = pts.find((x) => x.metric === metric && x.enum !== undefined);
    if (pt) return { enum: pt.enum };
  }
  return undefined;
}

/**
 * What a reading of `metric` means in words, where the profile says: the name its `enums`
 * give the value, or the coils of a bit-mask point. Undefined for a plain quantity, or a
 * value the enum does not name (the number is then all there is).
 */
export function valueName(p: Profile, metric: string, value: number): string | undefined {
  const pt = pointOf(p, metric);
  if (pt?.coils !== undefined) return Number.isInteger(value) && value >= 0 ? coilsWords(value, pt.coils) : undefined;
  if (pt?.enum === undefined) return undefined;
  const name = Object.entries(p.enums[pt.enum] ?? {}).find(([, v]) => v === value)?.[0];
  return name === undefined ? undefined : words(name);
}

/** Every reading of `metrics` that has a name, by metric. */
export function valueNames(p: Profile | undefined, metrics: Readonly<Record<string, number>>): Record<string, string> {
  const out: Record<string, string> = {};
  if (!p) return out;
  for (const [k, v] of Object.entries(metrics)) {
    const name = valueName(p, k, v);
    if (name !== undefined) out[k] = name;
  }
  return out;
}
