// The simulator logs ISO 8601 times, as the daemon does, so a bench's logs line up.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { createInterface } from "node:readline";
import { stringify } from "yaml";
import { withTmpDir } from "../support/tmp.js";
import { tcpScenario } from "../support/site.js";
import { exited } from "../support/cli.js";
import { repeatedKeys } from "../support/log-keys.js";

const SIM = resolve(fileURLToPath(import.meta.url), "../../../hw-sim/cli.js");

test("sitegate-sim logs JSON lines with ISO times and no repeated key", async () => {
  await withTmpDir(async (dir) => {
    const scenario = join(dir, "site.yaml");
    writeFileSync(scenario, stringify(tcpScenario()));
    const child = spawn(process.execPath, [SIM, "--scenario", scenario], {
      stdio: ["ignore", "pipe", "inherit"],
      env: { ...process.env, LOG_FORMAT: "json", LOG_LEVEL: "info" },
    });
    const lines: string[] = [];
    try {
      await new Promise<void>((done, fail) => {
        createInterface({ input: child.stdout! }).on("line", (l) => {
          lines.push(l);
          if (l.includes('"simulator running"')) done();
        });
        child.once("exit", (code) => fail(new Error(`the simulator exited with ${code}`)));
      });
    } finally {
      child.kill("SIGTERM");
      await exited(child);
    }
    assert.ok(lines.length >= 2);
    for (const l of lines) {
      const o = JSON.parse(l) as { time: unknown };
      assert.match(String(o.time), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/, l);
      assert.deepEqual(repeatedKeys(l), [], l);
    }
  });
});
