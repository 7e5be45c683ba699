// A profile's cross-references, checked by its schema: named constants exist, a write stays
// on its own device, a watchdog is refreshed in time.
import type { z } from "zod";
import type { ActionName } from "../model/vocabulary.js";

type Enums = Record<string, Record<string, number>>;

/** The value of a named constant (`ems_mode.forced`), or undefined when the profile has none by that name. */
export function enumValue(enums: Enums, ref: string): number | undefined {
  const [e = "", label = ""] = ref.split(".");
  return enums[e]?.[label];
}

/** Cross-references within a profile: named constants exist, a watchdog is refreshed in time. */
export function checkNames(
  p: {
    enums: Enums;
    actions: Partial<Record<ActionName, Array<{ value: unknown; restore?: unknown; unit?: number; when?: { identity: string } }>>>;
    identity?: Array<{ name: string }>;
    sub_units: number[];
    readback: Partial<Record<ActionName, Array<{ expect: unknown }>>>;
    refresh_s: number;
    revert_s?: number;
    points?: Array<{ enum?: string }>;
    models?: Record<string, Array<{ enum?: string }>>;
  },
  ctx: z.RefinementCtx,
): void {
  const known = (v: unknown) => typeof v !== "string" || v.startsWith("$") || enumValue(p.enums, v) !== undefined;
  for (const [name, steps] of Object.entries(p.actions))
    steps?.forEach((s, i) => {
      if (!known(s.value)) ctx.addIssue({ code: "custom", path: ["actions", name, i, "value"], message: "names no value of enums" });
      if (s.when && !p.identity?.some((r) => r.name === s.when?.identity))
        ctx.addIssue({
          code: "custom",
          path: ["actions", name, i, "when", "identity"],
          message: "names no identity register of the profile",
        });
      if (s.restore !== undefined && !known(s.restore))
        ctx.addIssue({ code: "custom", path: ["actions", name, i, "restore"], message: "names no value of enums" });
      // A profile writes only to its own device: its unit, or a sub-device it declares; never unit 0 (broadcast).
      if (s.unit !== undefined && !p.sub_units.includes(s.unit))
        ctx.addIssue({
          code: "custom",
          path: ["actions", name, i, "unit"],
          message:
            s.unit === 0
              ? "unit 0 is the broadcast address: a profile never writes to it"
              : "is not one of the profile's sub_units: a profile writes only to its own device",
        });
    });
  for (const [name, checks] of Object.entries(p.readback)) {
    if (!(name in p.actions)) ctx.addIssue({ code: "custom", path: ["readback", name], message: `the profile has no ${name} action` });
    checks?.forEach((c, i) => {
      if (!known(c.expect)) ctx.addIssue({ code: "custom", path: ["readback", name, i, "expect"], message: "names no value of enums" });
    });
  }
  p.points?.forEach((pt, i) => {
    if (pt.enum !== undefined && !(pt.enum in p.enums))
      ctx.addIssue({ code: "custom", path: ["points", i, "enum"], message: "names no enum of enums" });
  });
  for (const [model, pts] of Object.entries(p.models ?? {}))
    pts.forEach((pt, i) => {
      if (pt.enum !== undefined && !(pt.enum in p.enums))
        ctx.addIssue({ code: "custom", path: ["models", model, i, "enum"], message: "names no enum of enums" });
    });
  if (p.revert_s !== undefined && (p.refresh_s === 0 || p.refresh_s >= p.revert_s))
    ctx.addIssue({
      code: "custom",
      path: ["refresh_s"],
      message: `must be set and below revert_s (${p.revert_s} s), or the device reverts during an event`,
    });
}

/** A `relocate` group names points of the profile, none of them required (a block that may be absent holds none). */
export function checkRelocate(
  p: { points: Array<{ metric: string; required: boolean }>; relocate: Array<{ points: string[] }> },
  ctx: z.RefinementCtx,
): void {
  p.relocate.forEach((g, i) =>
    g.points.forEach((m, j) => {
      const pt = p.points.find((x) => x.metric === m);
      if (!pt) ctx.addIssue({ code: "custom", path: ["relocate", i, "points", j], message: `names no point of the profile (${m})` });
      else if (pt.required)
        ctx.addIssue({
          code: "custom",
          path: ["relocate", i, "points", j],
          message: `${m} is required: a block that may be absent holds none`,
        });
    }),
  );
}
