// The bench simulator as its own process (`sitegate-sim`, hw-sim/cli.js), as the benches run
// it beside the bus or gateway under test: the scenario written to dir/scenario.json, JSON
// logs, stderr inherited; ready once it logs "simulator running" (that line, parsed, gives
// its TCP ports). For a simulator in the test's own process, site.ts's withSite.
import { spawn, type ChildProcess } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** dist/hw-sim/cli.js, next to the compiled tests. */
export const SIM_CLI = resolve(fileURLToPath(import.meta.url), "../../../hw-sim/cli.js");

export interface SimProcess {
  child: ChildProcess;
  /** The TCP ports of the scenario's tcp ports, in order. */
  tcp: number[];
  /** SIGTERM, and the exit. */
  stop(): Promise<void>;
}

export async function spawnSim(dir: string, scenario: unknown, env: Record<string, string> = {}): Promise<SimProcess> {
  const file = join(dir, "scenario.json");
  writeFileSync(file, JSON.stringify(scenario));
  const child = spawn(process.execPath, [SIM_CLI, "--scenario", file, "--base-dir", dir], {
    stdio: ["ignore", "pipe", "inherit"],
    env: { ...process.env, LOG_FORMAT: "json", ...env },
  });
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const gone = new Promise((r) => child.once("exit", r));
      child.kill("SIGTERM");
      await gone;
    }
  };
  try {
    const tcp = await new Promise<number[]>((ok, fail) => {
      let out = "";
      child.stdout!.on("data", (d: Buffer) => {
        out += d.toString();
        for (const line of out.split("\n")) {
          if (!line.includes("simulator running")) continue;
          try {
            ok((JSON.parse(line) as { tcp?: number[] }).tcp ?? []);
          } catch {
            /* a partial line: wait for the rest */
          }
        }
      });
      child.once("exit", (c) => fail(new Error(`sitegate-sim exited (${c})`)));
    });
    // its later lines are not kept
    child.stdout!.removeAllListeners("data");
    child.stdout!.resume();
    return { child, tcp, stop };
  } catch (e) {
    await stop();
    throw e;
  }
}
