// The config schema's problems in an installer's words: what was expected and what was
// found, "required" for a key that is missing, and the nearest known key for one that is
// not (`did you mean "poll_interval_ms"?`). Where each problem is in the file is
// source.ts's.
import type { z } from "zod";
import type { ErrorDetail } from "../errors.js";
import { formatPath, issuesToDetails } from "../util/zod-issues.js";
import { nearest } from "../util/nearest.js";
import { isSecretPath, shownValue } from "./secret-mask.js";
import type { ConfigProblem } from "./source.js";

type Loose = Record<string, unknown>;

const A: Record<string, string> = {
  string: "a string",
  number: "a number",
  int: "an integer",
  boolean: "true or false",
  array: "a list",
  object: "a block of keys",
};

const listed = (values: readonly unknown[]) =>
  values.length === 1 ? JSON.stringify(values[0]) : `one of ${values.map((v) => JSON.stringify(v)).join(", ")}`;

function bound(i: Loose, word: "at least" | "at most"): string {
  const n = String(i.minimum ?? i.maximum);
  const strict = i.inclusive === false;
  if (i.origin === "number" || i.origin === "int" || i.origin === "bigint")
    return `a number ${word === "at least" ? (strict ? ">" : ">=") : strict ? "<" : "<="} ${n}`;
  const unit = i.origin === "string" ? "characters" : "items";
  if (word === "at least" && n === "1" && !strict) return i.origin === "string" ? "a value that is not empty" : "at least one item";
  return `${word} ${n} ${unit}`;
}

/**
 * zod's message for an issue the schema gives no words of its own: what was expected.
 * Passed to safeParse as its `error` map (a schema's own message wins over it).
 */
export function expectedText(issue: z.core.$ZodRawIssue): string | undefined {
  const i = issue as unknown as Loose;
  switch (issue.code) {
    case "invalid_type":
      return `expected ${A[String(i.expected)] ?? String(i.expected)}`;
    case "too_small":
      return `expected ${bound(i, "at least")}`;
    case "too_big":
      return `expected ${bound(i, "at most")}`;
    case "invalid_value":
      return `expected ${listed(i.values as unknown[])}`;
    case "not_multiple_of":
      return `expected a multiple of ${String(i.divisor)}`;
    case "invalid_union": {
      // a union of values (1 | 2 | 3 | 99): the values it takes
      const branches = (i.errors ?? []) as Loose[][];
      const values = branches.flat().flatMap((x) => (x.code === "invalid_value" ? (x.values as unknown[]) : []));
      return branches.length && values.length === branches.length ? `expected ${listed(values)}` : undefined;
    }
    case "invalid_format":
      if (i.format === "regex") return `expected text matching ${String(i.pattern)}`;
      return `expected ${i.format === "uuid" ? "a UUID" : i.format === "url" ? "a URL" : `a ${String(i.format)}`}`;
    default:
      return undefined;
  }
}

/** The keys the schema knows at `path` (every variant's, for a union), for "did you mean". */
export function knownKeys(schema: z.ZodType, path: ReadonlyArray<PropertyKey>): string[] {
  let level: Loose[] = [schema as unknown as Loose];
  const def = (s: Loose) => (s._zod as { def: Loose }).def;
  const unwrap = (s: Loose): Loose[] => {
    const d = def(s);
    if (d.type === "union") return (d.options as Loose[]).flatMap(unwrap);
    if (d.type === "pipe") return unwrap(d.in as Loose);
    if (d.innerType) return unwrap(d.innerType as Loose);
    return [s];
  };
  for (const seg of [...path, undefined]) {
    level = level.flatMap(unwrap);
    if (seg === undefined) break;
    level = level.flatMap((s) => {
      const d = def(s);
      if (d.type === "object") {
        const child = (d.shape as Record<string, Loose>)[String(seg)];
        return child ? [child] : [];
      }
      if (d.type === "array") return [d.element as Loose];
      if (d.type === "record") return [d.valueType as Loose];
      return [];
    });
  }
  return [...new Set(level.flatMap((s) => (def(s).type === "object" ? Object.keys(def(s).shape as Loose) : [])))];
}

/** One issue in the installer's words, or undefined where the shared wording fits (a union of blocks). */
function describe(schema: z.ZodType, issue: z.core.$ZodIssue, path: PropertyKey[]): ConfigProblem[] | undefined {
  const i = issue as unknown as Loose;
  const where = path.filter((p): p is string | number => typeof p !== "symbol");
  if (issue.code === "unrecognized_keys") {
    const known = knownKeys(schema, where);
    // what the block takes: the nearest key, or (a short list) every key it knows
    const expected = (key: string) => {
      const near = nearest(key, known);
      if (near) return `; did you mean "${near}"?`;
      return known.length && known.length <= 12 ? ` (expected one of ${known.join(", ")})` : "";
    };
    return issue.keys.map((key) => ({ path: formatPath([...path, key]), message: `unknown key${expected(key)}`, on: "key" as const }));
  }
  if (issue.code === "invalid_union" && typeof i.discriminator === "string") {
    // the key that says which kind of block this is (a TCP or an RTU device): reported at that key, with its value
    const value = (i.input as Loose | undefined)?.[i.discriminator];
    const options = Array.isArray(i.options) ? (i.options as unknown[]) : [];
    const expected = options.length ? `expected ${listed(options)}` : issue.message;
    return [
      {
        path: formatPath(path),
        message: value === undefined ? `required (${expected})` : `${expected}, found ${shownValue(value, false)}`,
      },
    ];
  }
  const missing = "input" in issue && i.input === undefined && issue.code !== "custom";
  if (missing) return [{ path: formatPath(path), message: "required" }];
  if (issue.code === "invalid_union" && issue.errors.some((b) => b.some((x) => x.path.length > 0))) return undefined;
  let message = issue.message;
  // a rule over a block (superRefine) reports on one of its keys with the block as its input: no "found" then
  const block = typeof i.input === "object" && i.input !== null && issue.code === "custom";
  if (!("input" in issue) || block) return [{ path: formatPath(path), message }];
  message += `, found ${shownValue(i.input, isSecretPath(where))}`;
  if (issue.code === "invalid_value" && typeof i.input === "string") {
    const near = nearest(
      i.input,
      issue.values.filter((v): v is string => typeof v === "string"),
    );
    if (near) message += `; did you mean "${near}"?`;
  }
  return [{ path: formatPath(path), message }];
}

/** The config schema's issues as problems by path, one per problem, in the installer's words. */
export function configIssues(schema: z.ZodType, issues: ReadonlyArray<z.core.$ZodIssue>): ErrorDetail[] {
  return issuesToDetails(issues, [], (issue, path) => describe(schema, issue, path));
}
