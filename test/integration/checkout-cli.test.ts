// `bin/sitegate` from a clean clone: the CLI on the pinned runtime in var/runtime/ whatever
// `node` is on PATH (Debian's is 20 here), called by its path, through a symlink, or with a
// clear next step when `make setup-run build` has not run yet. The clone is `git clone` of
// this checkout (so it holds what is committed); its runtime and node_modules are links to
// this checkout's (no network), and dist/src a copy of this build (what `make build` makes).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { cpSync, mkdirSync, symlinkSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { withTmpDir } from "../support/tmp.js";
import { VERSION } from "../../src/version.js";

const ROOT = resolve(fileURLToPath(import.meta.url), "../../../..");
/** A PATH with the machine's own tools (and its own node, if it has one) but not the pinned runtime. */
const SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin";

function cloneInto(dir: string, opts: { runtime: boolean }): string {
  const clone = join(dir, "clone");
  const git = spawnSync("git", ["clone", "-q", ROOT, clone], { encoding: "utf8" });
  assert.equal(git.status, 0, git.stderr);
  symlinkSync(join(ROOT, "node_modules"), join(clone, "node_modules"));
  cpSync(join(ROOT, "dist/src"), join(clone, "dist/src"), { recursive: true });
  if (opts.runtime) {
    mkdirSync(join(clone, "var"));
    symlinkSync(join(ROOT, "var/runtime"), join(clone, "var/runtime"));
  }
  return clone;
}

const run = (bin: string, args: string[], cwd: string) =>
  spawnSync(bin, args, { encoding: "utf8", cwd, env: { ...process.env, PATH: SYSTEM_PATH } });

test("bin/sitegate --help and --version work from a clean clone, on the pinned runtime, from any folder and through a symlink", () =>
  withTmpDir((dir) => {
    const clone = cloneInto(dir, { runtime: true });
    const help = run(join(clone, "bin/sitegate"), ["--help"], clone);
    assert.equal(help.status, 0, help.stderr);
    assert.match(help.stdout, new RegExp(`^sitegate ${VERSION.replaceAll(".", "\\.")}: the site controller runtime`));
    assert.match(help.stdout, /sitegate --version/);
    const commands = /^commands:\n((?: {2}\S.*\n)+)/m.exec(help.stdout)?.[1]?.trimEnd().split("\n") ?? [];
    assert.ok(commands.length >= 14, help.stdout);
    for (const line of commands) assert.match(line, /^ {2}[a-z-]+ +[a-z].{15,}$/, `a one-line description: ${line}`);
    assert.match(help.stdout, /^ {2}events +the dispatch events/m);

    // relative to the shell's folder, and through a symlink in a folder of the user's PATH
    const version = run("bin/sitegate", ["--version"], clone);
    assert.equal(version.status, 0, version.stderr);
    assert.match(
      version.stdout,
      new RegExp(`^sitegate ${VERSION.replaceAll(".", "\\.")} node ${process.versions.node} \\(abi \\d+\\) linux-`),
    );
    mkdirSync(join(dir, "home-bin"));
    symlinkSync(join(clone, "bin/sitegate"), join(dir, "home-bin/sitegate"));
    const linked = run(join(dir, "home-bin/sitegate"), ["--version"], dir);
    assert.equal(linked.status, 0, linked.stderr);
    assert.equal(linked.stdout, version.stdout);

    // a command's own help, and a usage error's exit code, come through unchanged
    const events = run(join(clone, "bin/sitegate"), ["events", "--help"], dir);
    assert.equal(events.status, 0, events.stderr);
    assert.match(events.stdout, /usage: sitegate events \[--config FILE\]/);
    assert.equal(run(join(clone, "bin/sitegate"), ["no-such-command"], dir).status, 2);
  }));

test("bin/sitegate before `make setup-run build` says what is missing and what to run", () =>
  withTmpDir((dir) => {
    const clone = cloneInto(dir, { runtime: false });
    const r = run(join(clone, "bin/sitegate"), ["--help"], dir);
    assert.equal(r.status, 1);
    assert.equal(r.stdout, "");
    const pinned = join(clone, "var/runtime", `node-v${process.versions.node}-linux-${process.arch}`, "bin/node");
    assert.equal(r.stderr, `sitegate: ${pinned} is missing; run \`make setup-run build\` in ${clone} first (\`make run\` does it too)\n`);
  }));
