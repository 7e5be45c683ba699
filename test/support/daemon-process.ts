// `sitegate run` as a child process, started as systemd/sitegate.service starts it (its
// node flags and environment), with the test config (partner callbacks to a closed port,
// no devices): for tests, benches, the fuzzers and the power-cut run that need the daemon on
// its own event loop and its API up. It starts on cli.ts's spawnDaemon, the one place a test
// starts `sitegate run`. Its JSON log lines are kept; it resolves with the API URL from
// "api listening".
import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { chmodSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import type { ConfigInput } from "../../src/config/schema.js";
import { spawnDaemon as spawnRun, writeConfig } from "./cli.js";
import { testConfigInput } from "./config.js";
import { repeatedKeys } from "./log-keys.js";
import { unitCommand } from "./site50.js";

export interface DaemonProcess {
  child: ChildProcess;
  url: string;
  configFile: string;
  /** Every log line so far, parsed. */
  lines: Array<Record<string, unknown>>;
  /** Log lines with a repeated key ("key: line"); stop() fails when there is any. */
  repeated: string[];
  /** Whether the process is still running. */
  alive(): boolean;
  stop(): Promise<void>;
}

export async function spawnDaemon(
  dir: string,
  over: Partial<ConfigInput> = {},
  opts: { configMode?: number; nodeArgs?: string[]; env?: Record<string, string> } = {},
): Promise<DaemonProcess> {
  const configFile = writeConfig(dir, { ...testConfigInput(join(dir, "data")), log_level: "info", ...over });
  chmodSync(configFile, opts.configMode ?? 0o640);
  const unit = unitCommand();
  const child = spawnRun(configFile, {
    nodeArgs: opts.nodeArgs ?? unit.nodeArgs,
    stdio: ["ignore", "pipe", "pipe"],
    // `opts.env`: added to the unit's environment; an empty value takes a variable out.
    env: { ...unit.env, ...opts.env, LOG_FORMAT: "json", LOG_LEVEL: "info" },
  });
  const lines: Array<Record<string, unknown>> = [];
  const repeated: string[] = [];
  let stderr = "";
  child.stderr!.on("data", (b: Buffer) => (stderr = (stderr + b.toString()).slice(-4000)));
  const url = await new Promise<string>((resolve, reject) => {
    const rl = createInterface({ input: child.stdout! });
    rl.on("line", (l) => {
      let o: Record<string, unknown>;
      try {
        o = JSON.parse(l) as Record<string, unknown>;
      } catch {
        return;
      }
      if (lines.length < 10_000) lines.push(o);
      for (const key of repeatedKeys(l)) repeated.push(`${key}: ${l}`);
      if (o.msg === "api listening" && typeof o.url === "string") resolve(o.url);
    });
    child.once("exit", (code) => reject(new Error(`sitegate run exited with ${code} before listening: ${stderr}`)));
  });
  return {
    child,
    url,
    configFile,
    lines,
    repeated,
    alive: () => child.exitCode === null && child.signalCode === null,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((r) => child.once("exit", r));
        child.kill("SIGTERM");
        await exited;
      }
      // Every test that runs the daemon this way checks its log: no line repeats a key (jq would read it wrongly).
      assert.deepEqual(repeated, [], "log lines with a repeated key");
    },
  };
}
