// zod issues as path-precise, human lines: `auth.users[0].password_hash: required`.
// Shared by the config loader, the API, the profile loader and the simulator.
import type { z } from "zod";
import type { ErrorDetail } from "../errors.js";

/** `a.b[0].c` from a zod path. */
export function formatPath(path: ReadonlyArray<PropertyKey>): string {
  let out = "";
  for (const p of path) {
    if (typeof p === "number") out += `[${p}]`;
    else out += out === "" ? String(p) : `.${String(p)}`;
  }
  return out;
}

/** A caller's own wording of an issue at `path`; undefined: the wording below. */
export type IssueWords = (issue: z.core.$ZodIssue, path: PropertyKey[]) => ErrorDetail[] | undefined;

/** Turns zod issues into path-precise, human lines; one per problem. */
export function issuesToDetails(
  issues: ReadonlyArray<z.core.$ZodIssue>,
  prefix: ReadonlyArray<PropertyKey> = [],
  words?: IssueWords,
): ErrorDetail[] {
  const out: ErrorDetail[] = [];
  for (const issue of issues) {
    const path = [...prefix, ...issue.path];
    const own = words?.(issue, path);
    if (own) {
      out.push(...own);
    } else if (issue.code === "unrecognized_keys") {
      for (const key of issue.keys) out.push({ path: formatPath([...path, key]), message: "unknown key" });
    } else if (issue.code === "invalid_type" && /received undefined$/.test(issue.message)) {
      out.push({ path: formatPath(path), message: "required" });
    } else if (issue.code === "invalid_union" && issue.errors.some((branch) => branch.some((i) => i.path.length > 0))) {
      // An object union: report the branch that got furthest rather than "invalid input":
      // one that failed inside the value (a nested path), then the one with fewest problems.
      const depth = (branch: ReadonlyArray<z.core.$ZodIssue>) => (branch.some((i) => i.path.length > 0) ? 0 : 1);
      const best = issue.errors.reduce((a, b) => (depth(a) < depth(b) || (depth(a) === depth(b) && a.length <= b.length) ? a : b));
      const nested = issuesToDetails(best, path, words);
      out.push(...(nested.length ? nested : [{ path: formatPath(path), message: issue.message }]));
    } else {
      out.push({ path: formatPath(path), message: issue.message });
    }
  }
  return out;
}
