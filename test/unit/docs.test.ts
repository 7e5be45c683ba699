// The docs name only what exists: every relative link and anchor resolves, docs/README.md
// indexes every page, and every `make` target, `sitegate` command, config key and
// `sitegate_*` metric named in docs/ and the README is in the Makefile, src/cli.ts, the config
// schema and src. docs/config-reference.md is what `make docs` writes from the schema today.
// Each check is a function of the text, and the first tests feed it a wrong name: a check
// that cannot fail would pass here too.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { configJsonSchema } from "../../src/cli/config-schema.js";
import { configReferenceMarkdown, keyRows } from "../../src/cli/config-reference.js";
import { declaredRole } from "../../src/modbus/device/wire-types.js";

const ROOT = resolve(fileURLToPath(import.meta.url), "../../../..");
const read = (file: string) => readFileSync(join(ROOT, file), "utf8");
const DOCS = readdirSync(join(ROOT, "docs"))
  .filter((f) => f.endsWith(".md"))
  .map((f) => `docs/${f}`);
const PAGES = ["README.md", ...DOCS];

/** The text inside backticks and fenced blocks: where a page names a command, key or metric. */
function codeOf(md: string): string[] {
  const fenced = [...md.matchAll(/^```[^\n]*\n([\s\S]*?)^```/gm)].map((m) => m[1]);
  const inline = [...md.replace(/^```[^\n]*\n[\s\S]*?^```/gm, "").matchAll(/`([^`\n]+)`/g)].map((m) => m[1]);
  return [...fenced, ...inline];
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes. */
export function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, "")
    .replace(/ /g, "-");
}

function anchorsOf(md: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const m of md.replace(/^```[\s\S]*?^```/gm, "").matchAll(/^#{1,6} (.+)$/gm)) {
    const base = slug(m[1]);
    const n = seen.get(base) ?? 0;
    out.add(n ? `${base}-${n}` : base);
    seen.set(base, n + 1);
  }
  return out;
}

/** Relative links of a page (file.md, file.md#anchor, #anchor) that lead nowhere. */
export function brokenLinks(file: string, md: string, readOther = (f: string) => read(f)): string[] {
  const bad: string[] = [];
  const text = md.replace(/^```[\s\S]*?^```/gm, "");
  for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
    const target = m[1];
    if (/^[a-z]+:/i.test(target)) continue;
    const [path, anchor] = target.split("#", 2);
    const to = path ? relative(ROOT, resolve(join(ROOT, dirname(file)), path)) : file;
    if (path && !existsSync(join(ROOT, to))) bad.push(`${file}: ${target} (no ${to})`);
    else if (anchor !== undefined && to.endsWith(".md") && !anchorsOf(to === file ? md : readOther(to)).has(anchor))
      bad.push(`${file}: ${target} (no heading #${anchor} in ${to})`);
  }
  return bad;
}

function makeTargets(): Set<string> {
  const mk = read("Makefile");
  return new Set([...mk.matchAll(/^([a-z][a-z0-9 -]*):(?!=)/gm)].flatMap((m) => m[1].split(/\s+/)).filter(Boolean));
}

/** `make X` in code where X is no Makefile target (variables before or after it are skipped). */
export function unknownMakeTargets(md: string, targets: Set<string>): string[] {
  const bad: string[] = [];
  for (const code of codeOf(md))
    for (const m of code.matchAll(/(?:^|[\s;&(|])make((?: +[A-Z_]+=\S*)*) +([a-z][a-z0-9-]*)/g))
      if (!targets.has(m[2])) bad.push(`make ${m[2]}`);
  return bad;
}

function cliCommands(): Set<string> {
  const cli = read("src/cli.ts");
  const block = /const COMMANDS[^{]*\{([\s\S]*?)\n\};/.exec(cli)?.[1] ?? "";
  return new Set([...block.matchAll(/^ {2}"?([a-z][a-z-]*)"?:/gm)].map((m) => m[1]));
}

/** `sitegate X` in code where X is no command of src/cli.ts (not "the sitegate X" or a "# sitegate ..." comment: prose). */
export function unknownCommands(md: string, commands: Set<string>): string[] {
  const bad: string[] = [];
  // a span with an e-mail address names a person ("sitegate maintainers <...@...>"), not a command
  for (const code of codeOf(md).filter((c) => !c.includes("@")))
    for (const m of code.matchAll(/(?:^|[\s;&(|$`])(?<!(?:\bthe|#) )sitegate ([a-z][a-z-]*)\b(?![.-])/g))
      if (!commands.has(m[1])) bad.push(`sitegate ${m[1]}`);
  return bad;
}

const FILE_NAME = /\.(json|md|ya?ml|ts|js|db|service|timer|path|conf|pem|key|pub|sh|deb|bundle|txt)$/;

/** Dotted key paths in code (`telemetry.commit_interval_s`, `auth.users[0].password_hash`) that the schema lacks. */
export function unknownKeys(md: string, keys: Set<string>): string[] {
  const top = new Set([...keys].filter((k) => !/[.[]/.test(k)));
  const bad: string[] = [];
  for (const code of codeOf(md))
    for (const m of code.matchAll(/(?<![\w./$-])([a-z_]+(?:\[\d*\])?(?:\.[a-z_]+(?:\[\d*\])?)+)(?![\w/-])/g)) {
      const path = m[1];
      if (!top.has(path.split(/[.[]/)[0]) || FILE_NAME.test(path)) continue;
      const norm = path.replace(/\[\d*\]/g, "[]");
      if (!keys.has(norm) && !keys.has(norm.replace(/\[\]/g, ""))) bad.push(path);
    }
  return bad;
}

function srcText(dir = join(ROOT, "src")): string {
  return readdirSync(dir)
    .map((f) => join(dir, f))
    .map((p) => (statSync(p).isDirectory() ? srcText(p) : p.endsWith(".ts") ? readFileSync(p, "utf8") : ""))
    .join("\n");
}

/** `sitegate_*` metric names no source file contains (histogram and counter suffixes allowed). */
export function unknownMetrics(md: string, src: string): string[] {
  const names = new Set([...md.matchAll(/\bsitegate_[a-z_]+[a-z]/g)].map((m) => m[0]));
  return [...names].filter((n) => !src.includes(n) && !src.includes(n.replace(/_(bucket|sum|count)$/, "")));
}

/** Citations of documents a reader of the docs does not have: the design notes, spec sections, issues. */
export function privateCitations(md: string): string[] {
  return [...md.matchAll(/\b(?:DESIGN(?:\.md)?(?: B\d+)?|STYLE\.md|spec \d+(?:\.\d+)*|issue #?\d+|B[1-9]\b(?= ?[(),.;:]))/g)].map(
    (m) => m[0],
  );
}

function keySet(): Set<string> {
  return new Set(keyRows(configJsonSchema()).map((r) => r.path));
}

test("each check reports a wrong name, and passes a right one", () => {
  assert.deepEqual(unknownMakeTargets("run `make tset` or `make BENCH_QUICK=1 bench`", new Set(["test", "bench"])), ["make tset"]);
  assert.deepEqual(
    unknownCommands("`sitegate chek-config`; `systemctl restart sitegate`; `sitegate run`; `# sitegate ok`", new Set(["run"])),
    ["sitegate chek-config"],
  );
  const keys = keySet();
  assert.deepEqual(unknownKeys("`telemetry.commit_interval_s`, `auth.users[0].password_hash`, `telemetry.commit_intervall`", keys), [
    "telemetry.commit_intervall",
  ]);
  assert.deepEqual(unknownMetrics("`sitegate_part_up` and `sitegate_parts_upp`", "'sitegate_part_up'"), ["sitegate_parts_upp"]);
  assert.deepEqual(brokenLinks("docs/x.md", "[a](install.md) [b](nowhere.md) [c](install.md#no-such-heading)"), [
    "docs/x.md: nowhere.md (no docs/nowhere.md)",
    "docs/x.md: install.md#no-such-heading (no heading #no-such-heading in docs/install.md)",
  ]);
  assert.deepEqual(privateCitations("as DESIGN B7 says; (spec 2.6); see issue 34; rules (B4), not B2B sales"), [
    "DESIGN B7",
    "spec 2.6",
    "issue 34",
    "B4",
  ]);
  assert.equal(slug("The path a bundle takes, and what each check prevents"), "the-path-a-bundle-takes-and-what-each-check-prevents");
});

test("every relative link of docs/ and the README resolves, anchors included", () => {
  assert.deepEqual(
    PAGES.flatMap((f) => brokenLinks(f, read(f))),
    [],
  );
});

test("docs/README.md links every page of docs/", () => {
  const index = read("docs/README.md");
  const linked = new Set([...index.matchAll(/\]\(([^)#\s]+)/g)].map((m) => `docs/${m[1]}`));
  assert.deepEqual(
    DOCS.filter((f) => f !== "docs/README.md" && !linked.has(f)),
    [],
  );
});

test("every make target, sitegate command, config key and metric the docs name exists", () => {
  const targets = makeTargets();
  const commands = cliCommands();
  const keys = keySet();
  const src = srcText();
  assert.ok(targets.has("test") && commands.has("run") && keys.has("telemetry.commit_interval_s"), "the sources were read");
  const problems = PAGES.flatMap((f) => {
    const md = read(f);
    return [...unknownMakeTargets(md, targets), ...unknownCommands(md, commands), ...unknownKeys(md, keys), ...unknownMetrics(md, src)].map(
      (p) => `${f}: ${p}`,
    );
  });
  assert.deepEqual(problems, []);
});

test("no page cites a document the reader does not have", () => {
  assert.deepEqual(
    PAGES.flatMap((f) => privateCitations(read(f)).map((c) => `${f}: ${c}`)),
    [],
  );
});

test("config.example.yaml shows every block of the schema, and names only keys that exist", () => {
  const keys = keySet();
  const top = [...keys].filter((k) => !/[.[]/.test(k));
  const example = read("config.example.yaml");
  // keys, commented out or not; a comment's prose ("# sitegate: an example ...") is no key
  const named = [...example.matchAll(/^(?:# ?)? *([a-z_]+):(?:\s*(?:#.*)?$|\s+[{["]|\s+[^\s#]+\s*(?:#.*)?$)/gm)].map((m) => m[1]);
  assert.deepEqual(
    named.filter((k) => !top.includes(k) && ![...keys].some((p) => p.endsWith(`.${k}`) || p.endsWith(`[].${k}`))),
    [],
  );
  assert.deepEqual(
    top.filter((k) => !new RegExp(`^(# )?${k}:`, "m").test(example)),
    [],
    "a top-level key config.example.yaml does not show",
  );
});

test("docs/config-reference.md is what `make docs` writes from the schema", () => {
  assert.equal(
    read("docs/config-reference.md"),
    configReferenceMarkdown(configJsonSchema()),
    "run `make docs` and commit docs/config-reference.md",
  );
});

test("docs/config-reference.md gives mb_device_type's codes as the partner interface names them (1 meter ... 99 others)", () => {
  const row = read("docs/config-reference.md")
    .split("\n")
    .find((l) => l.startsWith("| `devices[].mb_device_type`"));
  assert.ok(row, "the reference has an mb_device_type row");
  for (const code of [1, 2, 3, 99]) assert.match(row, new RegExp(`\\b${code} ${declaredRole(code).name}\\b`), `code ${code}`);
});

test("docs/config-reference.md gives a key whose rule differs by device kind as one type with its rule, not a union of types", () => {
  const rows = read("docs/config-reference.md").split("\n");
  const row = (key: string) => rows.find((l) => l.startsWith(`| \`devices[].${key}\``)) ?? "";
  assert.match(
    row("mb_slave_id"),
    /\| integer, 1\.\.247 when mb_type is 1, 0\.\.255 when mb_type is 2 \| required when mb_type is 1, `1` when mb_type is 2 \|/,
  );
  assert.match(row("mb_port"), /\| integer, 1\.\.65535 when mb_type is 2 \| required when mb_type is 2 \|/);
  for (const l of rows.filter((r) => r.startsWith("| `")))
    assert.doesNotMatch(l, /\| (integer|number|string)\b[^|]*\\\| (integer|number|string)\b/, `a union of one type: ${l}`);
});

test("the README and docs/install.md carry the same install block", () => {
  const block = (md: string) => /<!-- install:begin[^>]*-->[\s\S]*?<!-- install:end -->/.exec(md)?.[0];
  assert.ok(block(read("README.md")), "the README has the install markers");
  assert.equal(block(read("docs/install.md")), block(read("README.md")));
});
