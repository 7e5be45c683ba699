// The simulator is its own package of the workspace (hw-sim/, `sitegate-sim`): the product
// imports nothing of it, it takes from src/ only the base layer (errors, node-guard, util/),
// and every module it imports is one the gateway's release carries too (its .deb runs on the
// gateway's runtime and node_modules: docs/packaging.md, "The simulator's package").
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { dirname, join, relative, resolve } from "node:path";

const ROOT = resolve(fileURLToPath(import.meta.url), "../../../..");

function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith(".ts") && !e.name.endsWith(".d.ts"))
    .map((e) => join(e.parentPath, e.name))
    .filter((f) => !relative(ROOT, f).startsWith(join("hw-sim", "dist")));
}

/** Every module specifier a file imports, re-exports or loads with import(). */
function specifiers(file: string): string[] {
  const source = readFileSync(file, "utf8");
  const out: string[] = [];
  for (const m of source.matchAll(/^[ \t]*(?:import|export)\b[^;'"`]*?\bfrom\s*(["'])([^"'\n]+)\1/gm)) out.push(m[2]);
  for (const m of source.matchAll(/^[ \t]*import\s*(["'])([^"'\n]+)\1/gm)) out.push(m[2]);
  for (const m of source.matchAll(/\bimport\(\s*(["'])([^"'\n]+)\1\s*\)/g)) out.push(m[2]);
  return out;
}

/** The files a set of entry files reach by relative imports (TypeScript sources), with the bare packages they name. */
function reach(entries: string[]): { files: Set<string>; packages: Set<string> } {
  const files = new Set<string>();
  const packages = new Set<string>();
  const todo = [...entries];
  while (todo.length > 0) {
    const file = todo.pop()!;
    if (files.has(file)) continue;
    files.add(file);
    for (const spec of specifiers(file)) {
      if (spec.startsWith(".")) todo.push(resolve(dirname(file), spec).replace(/\.js$/, ".ts"));
      else if (!spec.startsWith("node:")) packages.add(spec.startsWith("@") ? spec.split("/").slice(0, 2).join("/") : spec.split("/")[0]);
    }
  }
  return { files, packages };
}

const json = (file: string) => JSON.parse(readFileSync(join(ROOT, file), "utf8")) as Record<string, any>;

test("nothing under src/ imports the simulator (hw-sim/, the sitegate-sim package)", () => {
  const into = tsFiles(join(ROOT, "src")).flatMap((f) =>
    specifiers(f)
      .filter((s) => s === "sitegate-sim" || (s.startsWith(".") && relative(ROOT, resolve(dirname(f), s)).startsWith("hw-sim")))
      .map((s) => `${relative(ROOT, f)}: ${s}`),
  );
  assert.deepEqual(into, []);
});

test("the simulator takes from src/ only the base layer: errors, node-guard and util/", () => {
  const { files } = reach(tsFiles(join(ROOT, "hw-sim")));
  const fromSrc = [...files].map((f) => relative(join(ROOT, "src"), f)).filter((f) => !f.startsWith(".."));
  assert.ok(fromSrc.includes("node-guard.ts"), `the simulator's command refuses another Node.js: ${fromSrc.join(", ")}`);
  assert.deepEqual(
    fromSrc.filter((f) => !(f === "errors.ts" || f === "node-guard.ts" || f.startsWith("util/"))),
    [],
    "the simulator's package would carry more of the product",
  );
});

test("hw-sim/package.json is a workspace package of the root, with the root's version, and names every package the simulator imports, as the gateway does", () => {
  const root = json("package.json");
  const sim = json("hw-sim/package.json");
  assert.deepEqual(root.workspaces, ["hw-sim"]);
  assert.equal(sim.name, "sitegate-sim");
  assert.equal(sim.version, root.version, "one version: the sitegate-sim .deb depends on sitegate (= version)");
  assert.equal(sim.type, "module");
  assert.deepEqual(sim.bin, { "sitegate-sim": "dist/hw-sim/cli.js" });
  assert.deepEqual(root.bin, { sitegate: "dist/src/cli.js" }, "the gateway's package names no simulator command");
  const { packages } = reach(tsFiles(join(ROOT, "hw-sim")));
  assert.deepEqual(Object.keys(sim.dependencies ?? {}).sort(), [...packages].sort(), "hw-sim/package.json dependencies");
  // the .deb runs on the gateway release's node_modules: each is a production dependency of it, same range
  for (const p of packages) assert.equal(root.dependencies[p], sim.dependencies[p], `${p}: the gateway's range`);
  const lock = json("package-lock.json");
  assert.deepEqual(
    lock.packages["node_modules/sitegate-sim"],
    { resolved: "hw-sim", link: true },
    "npm install after a package.json change",
  );
});
