// docs/config-reference.md, written from the config file's JSON Schema (the zod schema's own
// output), so the reference lists exactly the keys check-config takes: a key added to the
// schema without its page fails test/unit/docs.test.ts until `make docs` writes the page again.
type Json = Record<string, unknown>;

/** One key of the file: its path (`auth.users[].username`), type, default and meaning. */
export interface KeyRow {
  path: string;
  type: string;
  required: boolean;
  default?: unknown;
  description?: string;
  /** The same key in each variant of a union of blocks (a TCP and an RTU device): its type there, when the variants differ. */
  variants?: Variant[];
}

interface Variant {
  when: string;
  type: string;
  required: boolean;
  default?: unknown;
}

const asJson = (v: unknown): Json => (v && typeof v === "object" && !Array.isArray(v) ? (v as Json) : {});
const list = (v: unknown): Json[] => (Array.isArray(v) ? v.map(asJson) : []);
/** Bounds as large as these are zod's "any safe integer": no bound a reader needs to see. */
const SAFE = 2 ** 53 - 1;

function bounds(s: Json, lo: string, hi: string): string {
  const min = typeof s[lo] === "number" && s[lo] !== -SAFE ? s[lo] : undefined;
  const max = typeof s[hi] === "number" && s[hi] !== SAFE ? s[hi] : undefined;
  const exclusive = typeof s.exclusiveMinimum === "number" ? `> ${s.exclusiveMinimum as number}` : undefined;
  if (min !== undefined && max !== undefined) return ` ${String(min)}..${String(max)}`;
  if (exclusive) return ` ${exclusive}${max !== undefined ? `, <= ${String(max)}` : ""}`;
  if (min !== undefined) return ` >= ${String(min)}`;
  return max !== undefined ? ` <= ${String(max)}` : "";
}

/** How a reader would say a schema's type: `integer 1..60`, `"none" | "even"`, `list of CIDR`. */
export function typeText(s: Json): string {
  if ("const" in s) return JSON.stringify(s.const);
  if (Array.isArray(s.enum)) return s.enum.map((e) => JSON.stringify(e)).join(" \\| ");
  const variants = list(s.anyOf ?? s.oneOf);
  if (variants.length) return [...new Set(variants.map(typeText))].join(" \\| ");
  if (s.format === "cidrv4" || s.format === "cidrv6") return "CIDR";
  if (s.format === "uri") return "URL";
  if (s.format === "uuid") return "UUID";
  switch (s.type) {
    case "array": {
      const count = bounds(s, "minItems", "maxItems").trim();
      return `list of ${typeText(asJson(s.items))}${count ? ` (${count} items)` : ""}`;
    }
    case "object":
      return s.additionalProperties && typeof s.additionalProperties === "object" ? "map" : "object";
    case "integer":
    case "number":
      return `${s.type}${bounds(s, "minimum", "maximum")}`;
    case "string":
      return "string";
    default:
      return typeof s.type === "string" ? s.type : "any";
  }
}

/** Every key under `s`, depth first in the schema's order; one row per path (variants merged). */
export function keyRows(s: Json, prefix = "", rows = new Map<string, KeyRow>(), when?: string): KeyRow[] {
  const required = new Set(Array.isArray(s.required) ? (s.required as string[]) : []);
  for (const [name, raw] of Object.entries(asJson(s.properties))) {
    const child = asJson(raw);
    const path = prefix ? `${prefix}.${name}` : name;
    const row: KeyRow = { path, type: typeText(child), required: required.has(name), default: child.default, description: describe(child) };
    if (when) row.variants = [{ when, type: row.type, required: row.required, default: row.default }];
    addRow(rows, row);
    descend(child, path, rows, when);
  }
  return [...rows.values()];
}

/** The key whose constant tells the variants of a union apart, and each variant's name by it (`<key> is 1`). */
function variantNames(variants: Json[]): string[] | undefined {
  const props = variants.map((v) => asJson(v.properties));
  const key = Object.keys(props[0] ?? {}).find(
    (k) =>
      props.every((p) => "const" in asJson(p[k])) && new Set(props.map((p) => JSON.stringify(asJson(p[k]).const))).size === props.length,
  );
  return key ? props.map((p) => `${key} is ${JSON.stringify(asJson(p[key]).const)}`) : undefined;
}

function describe(s: Json): string | undefined {
  if (typeof s.description === "string") return s.description;
  const inner = list(s.anyOf ?? s.oneOf).find((v) => typeof v.description === "string");
  return inner?.description as string | undefined;
}

function addRow(rows: Map<string, KeyRow>, row: KeyRow): void {
  const had = rows.get(row.path);
  if (!had) {
    rows.set(row.path, row);
    return;
  }
  // The same key in two variants (a TCP and an RTU device): one row, both types.
  had.type = [...new Set([...had.type.split(" \\| "), ...row.type.split(" \\| ")])].join(" \\| ");
  had.required &&= row.required;
  had.description ??= row.description;
  had.default ??= row.default;
  if (had.variants || row.variants) had.variants = [...(had.variants ?? []), ...(row.variants ?? [])];
}

function descend(s: Json, path: string, rows: Map<string, KeyRow>, when?: string): void {
  if (s.type === "array") descend(asJson(s.items), `${path}[]`, rows, when);
  if (s.type === "object" && s.properties) keyRows(s, path, rows, when);
  if (s.type === "object" && s.additionalProperties && typeof s.additionalProperties === "object")
    descend(asJson(s.additionalProperties), `${path}.<key>`, rows, when);
  const variants = list(s.anyOf ?? s.oneOf);
  const names = variantNames(variants);
  variants.forEach((v, i) => descend(v, path, rows, names?.[i] ?? when));
}

/**
 * A key whose type differs by variant, as one type with its rule: `integer, 1..247 when
 * <key> is 1, 0..255 when <key> is 2`, not `integer 1..247 | integer 0..255`.
 */
function variantType(r: KeyRow): string | undefined {
  const vs = r.variants ?? [];
  if (new Set(vs.map((v) => v.type)).size < 2) return undefined;
  const base = vs[0]!.type.split(" ")[0]!;
  if (!vs.every((v) => v.type.split(" ")[0] === base)) return undefined;
  const rules = vs.filter((v) => v.type !== base).map((v) => `${v.type.slice(base.length + 1)} when ${v.when}`);
  return `${base}, ${rules.join(", ")}`;
}

/** The default column of a key required in one variant and defaulted (or optional) in another. */
function variantDefault(r: KeyRow): string | undefined {
  const vs = r.variants ?? [];
  if (new Set(vs.map((v) => v.required)).size < 2) return undefined;
  const parts = vs.flatMap((v) =>
    v.required ? [`required when ${v.when}`] : v.default !== undefined ? [`\`${JSON.stringify(v.default)}\` when ${v.when}`] : [],
  );
  return parts.join(", ");
}

/** Text in a table cell: a | would end the cell, and <site_id> would read as an HTML tag. */
const cell = (text: string) => text.replace(/\|/g, "\\|").replace(/</g, "\\<").replace(/\n/g, " ");

function rowText(r: KeyRow): string {
  // A block's default is its keys' defaults, listed in its own section.
  const def =
    variantDefault(r) ??
    (r.default === undefined || (r.type === "object" && typeof r.default === "object")
      ? r.required
        ? "required"
        : ""
      : `\`${JSON.stringify(r.default)}\``);
  // a page the text names (docs/fleet.md) becomes a link from this page, which sits beside it
  const meaning = cell(r.description ?? "").replace(/\bdocs\/([a-z0-9-]+\.md(?:#[a-z0-9-]+)?)/g, "[$1]($1)");
  return `| \`${r.path}\` | ${variantType(r) ?? r.type} | ${def.replace(/\|/g, "\\|")} | ${meaning} |`;
}

/** The whole page: the top-level keys, then one section per block, in the schema's order. */
export function configReferenceMarkdown(schema: Json, command = "sitegate config-schema --markdown"): string {
  const rows = keyRows(schema);
  const top = Object.keys(asJson(schema.properties));
  const header = ["| Key | Type | Default | Meaning |", "|---|---|---|---|"];
  const out = [
    "# Config reference",
    "",
    `<!-- Generated by \`${command}\` (\`make docs\`) from the schema check-config uses; edit the`,
    "     .describe() texts in src/config/*.ts, not this page. -->",
    "",
    "Every key of `/etc/sitegate/config.yaml`. Unknown keys are an error; a block without a",
    "default is optional (absent: the feature is off). `[]` is an item of a list, `<key>` a key",
    "of a map. What the file is for and what to set first: [configuration.md](configuration.md);",
    "an example with every block: [config.example.yaml](../config.example.yaml).",
    "",
    ...header,
    ...top.flatMap((k) => rows.filter((r) => r.path === k).map(rowText)),
  ];
  for (const block of top) {
    const inner = rows.filter((r) => r.path.startsWith(`${block}.`) || r.path.startsWith(`${block}[]`));
    if (!inner.length) continue;
    out.push("", `## ${block}`, "", ...header, ...inner.map(rowText));
  }
  return out.join("\n") + "\n";
}
