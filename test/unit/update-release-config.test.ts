// The update's check of the staged release against the site's config (release-config.ts):
// what each way a release's check-config can end makes of the update. Real child processes
// stand in for the staged release's CLI: one that accepts, refuses with its words, dies by a
// signal, answers at length, or whose runtime is missing.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { checkReleaseConfig } from "../../src/update/release-config.js";
import type { Manifest } from "../../src/update/bundle-format.js";
import { withTmpDir } from "../support/tmp.js";

/** A staged release whose dist/src/cli.js runs `body` (an ES module). */
function staged(dir: string, body: string): string {
  const root = join(dir, "release");
  mkdirSync(join(root, "dist", "src"), { recursive: true });
  writeFileSync(join(root, "dist", "src", "cli.js"), body);
  return root;
}

const manifest = (runtime: boolean) => ({ version: "9.9.9", runtime }) as unknown as Manifest;

function check(dir: string, body: string, runtime = false): { said: string[]; error?: Error } {
  const said: string[] = [];
  const cfg = join(dir, "config.yaml");
  writeFileSync(cfg, "site_id: x\n");
  try {
    checkReleaseConfig(staged(dir, body), manifest(runtime), {
      file: cfg,
      dataDir: join(dir, "no-data-dir-yet"),
      say: (m) => said.push(m),
    });
    return { said };
  } catch (e) {
    return { said, error: e as Error };
  }
}

test("a release whose check-config exits 0 accepts the config, and the update says so", () =>
  withTmpDir((dir) => {
    const r = check(dir, `if (process.argv.slice(2).join(" ") !== "check-config --config ${join(dir, "config.yaml")}") process.exit(3);`);
    assert.equal(r.error, undefined);
    assert.match(r.said.join("\n"), /release 9\.9\.9 accepts the config/);
  }));

test("a refusal carries check-config's own words and its exit status", () =>
  withTmpDir((dir) => {
    const r = check(dir, `process.stderr.write("config.yaml:3:5 partner.execution_url: required\\n"); process.exit(2);`);
    assert.equal(r.error?.name, "BundleRefused");
    assert.match(r.error!.message, /does not accept this site's config .* exit 2\):\nconfig\.yaml:3:5 partner\.execution_url: required/s);
  }));

test("a check-config killed by a signal is a refusal naming the signal", () =>
  withTmpDir((dir) => {
    const r = check(dir, `process.kill(process.pid, "SIGTERM"); setTimeout(() => {}, 10_000);`);
    assert.match(r.error?.message ?? "", /killed by SIGTERM/);
  }));

test("a long answer is cut to its first 2,000 characters", () =>
  withTmpDir((dir) => {
    const r = check(dir, `process.stdout.write("x".repeat(5000)); process.exit(1);`);
    const text = r.error?.message.split(":\n")[1] ?? "";
    assert.equal(text, `${"x".repeat(2000)}…`);
  }));

test("a release that names its own runtime and has none is refused with the spawn's error", () =>
  withTmpDir((dir) => {
    const r = check(dir, `process.exit(0);`, true);
    assert.match(r.error?.message ?? "", /ENOENT/);
  }));
