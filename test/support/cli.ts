// The `sitegate` binary as tests run it: its path, one-shot runs (sync and async), config
// files written as an installer would, and daemons spawned with `run` and stopped again.
import { execFile, spawn, spawnSync, type ChildProcess, type StdioOptions } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { stringify } from "yaml";

/** dist/src/cli.js, next to the compiled tests. */
export const CLI = resolve(fileURLToPath(import.meta.url), "../../../src/cli.js");

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `sitegate args...` to completion (stdin = input), LOG_LEVEL=warn. */
export function sitegate(args: string[], input?: string): CliResult {
  const r = spawnSync(process.execPath, [CLI, ...args], { input, encoding: "utf8", env: { ...process.env, LOG_LEVEL: "warn" } });
  return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

const execFileP = promisify(execFile);

/** The same without blocking the test's event loop (an in-process gateway keeps serving). */
export async function runCli(...args: string[]): Promise<CliResult> {
  try {
    const r = await execFileP(process.execPath, [CLI, ...args], { env: { ...process.env, LOG_LEVEL: "warn" } });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (e) {
    const err = e as { code: number; stdout: string; stderr: string };
    return { code: err.code, stdout: err.stdout, stderr: err.stderr };
  }
}

/** Writes cfg as dir/config.yaml (or `name`) and returns its path. */
export function writeConfig(dir: string, cfg: unknown, name = "config.yaml"): string {
  const file = join(dir, name);
  writeFileSync(file, stringify(cfg));
  return file;
}

export interface DaemonOptions {
  /** node flags before the script (the unit's, for instance). */
  nodeArgs?: string[];
  env?: Record<string, string>;
  stdio?: StdioOptions;
}

/**
 * `sitegate run --config file` in a child process (LOG_LEVEL=warn unless env says otherwise;
 * an empty value in env takes a variable out): the one place a test starts the daemon as a
 * process; daemon-process.ts's spawnDaemon waits on it for the API.
 */
export function spawnDaemon(configFile: string, opts: DaemonOptions = {}): ChildProcess {
  return spawn(process.execPath, [...(opts.nodeArgs ?? []), CLI, "run", "--config", configFile], {
    stdio: opts.stdio ?? "ignore",
    env: Object.fromEntries(Object.entries({ ...process.env, LOG_LEVEL: "warn", ...(opts.env ?? {}) }).filter(([, v]) => v !== "")),
  });
}

/** Resolves with the exit code (or signal) once the child has exited; at once if it has. */
export function exited(child: ChildProcess): Promise<number | NodeJS.Signals | null> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode ?? child.signalCode);
  return new Promise((r) => child.once("exit", (code, signal) => r(code ?? signal)));
}

/** Sends `signal` (SIGTERM: a clean stop) if the child still runs, and waits for its exit. */
export async function stopDaemon(child: ChildProcess, signal: NodeJS.Signals = "SIGTERM"): Promise<number | NodeJS.Signals | null> {
  if (child.exitCode === null && child.signalCode === null) child.kill(signal);
  return exited(child);
}
