// The one test switch: a crash-injection point is inert unless SITEGATE_TEST_HOOKS=1.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { withTmpDir } from "../support/tmp.js";

const HOOKS = pathToFileURL(resolve(fileURLToPath(import.meta.url), "../../../src/util/test-hooks.js")).href;

/** Runs testHook("apply-point") in a child process with `env`; its stdout says whether it went on. */
function reach(env: Record<string, string>): string {
  const code = `import { testHook } from ${JSON.stringify(HOOKS)}; await testHook("apply-point"); console.log("went on");`;
  const r = spawnSync(process.execPath, ["--input-type=module", "-e", code], {
    env: { PATH: process.env.PATH ?? "", ...env },
    encoding: "utf8",
    timeout: 30_000,
  });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout.trim();
}

test("a hook point is inert without SITEGATE_TEST_HOOKS=1, even when it is named", async () => {
  await withTmpDir((dir) => {
    const file = join(dir, "reached");
    assert.equal(reach({ SITEGATE_TEST_HOOK_AT: "apply-point", SITEGATE_TEST_HOOK_FILE: file }), "went on");
    assert.equal(existsSync(file), false);
    assert.equal(reach({ SITEGATE_TEST_HOOKS: "0", SITEGATE_TEST_HOOK_AT: "apply-point", SITEGATE_TEST_HOOK_FILE: file }), "went on");
    assert.equal(existsSync(file), false);
  });
});

test("with the switch, the named point reports itself and waits for the resume file", async () => {
  await withTmpDir((dir) => {
    const file = join(dir, "reached");
    const resume = join(dir, "resume");
    writeFileSync(resume, "go\n"); // a regular file: the read returns at once, where a FIFO would block
    const env = { SITEGATE_TEST_HOOKS: "1", SITEGATE_TEST_HOOK_FILE: file, SITEGATE_TEST_HOOK_RESUME: resume };
    assert.equal(reach({ ...env, SITEGATE_TEST_HOOK_AT: "another-point" }), "went on");
    assert.equal(existsSync(file), false, "another point is not this one");
    assert.equal(reach({ ...env, SITEGATE_TEST_HOOK_AT: "apply-point" }), "went on");
    assert.equal(readFileSync(file, "utf8"), "apply-point\n");
  });
});
