// A copy of this checkout's release that another user can reach: for a test that runs a
// child as that user (nobody) with this checkout's runtime and modules. The checkout may sit
// under a folder only root may enter (a clone in root's home or in a `mktemp -d`), and a
// capability such as CAP_DAC_READ_SEARCH does not help: access(2), which module loaders use
// to look for files, drops it for a user other than root.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, realpathSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const PROJECT = resolve(fileURLToPath(import.meta.url), "../../../..");

/**
 * The runtime (node/bin/node), dist/src, package.json and the production modules in
 * `dir`/release, hard-linked where the file system allows. `dir` must be a folder the other
 * user may walk to (the caller opens it).
 */
export function traversableRelease(dir: string): { root: string; node: string; dist: string } {
  const rel = join(dir, "release");
  const lock = JSON.parse(readFileSync(join(PROJECT, "package-lock.json"), "utf8")) as { packages: Record<string, { dev?: boolean }> };
  const production = Object.entries(lock.packages)
    .filter(([path, p]) => !p.dev && /^node_modules\/(@[^/]+\/)?[^/]+$/.test(path))
    .map(([path]) => path);
  const copies: [string, string][] = [
    [process.execPath, join(rel, "node", "bin", "node")],
    [join(PROJECT, "dist", "src"), join(rel, "dist", "src")],
    [join(PROJECT, "package.json"), join(rel, "package.json")],
    ...production.map((path): [string, string] => [join(PROJECT, path), join(rel, path)]),
  ];
  for (const [from, to] of copies) {
    mkdirSync(dirname(to), { recursive: true, mode: 0o755 });
    const src = realpathSync(from);
    if (spawnSync("cp", ["-rl", src, to]).status !== 0) assert.equal(spawnSync("cp", ["-r", src, to]).status, 0, `copy ${src}`);
  }
  return { root: rel, node: join(rel, "node", "bin", "node"), dist: join(rel, "dist", "src") };
}
