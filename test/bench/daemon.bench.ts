// Resident memory of `sitegate run` polling 50 simulated devices and pushing to a partner
// sink, against an idle Node.js process measured in the same run (lower is better, so the
// ratio is idle / ours).
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { stringify } from "yaml";
import type { BenchFn } from "./types.js";
import { startSim, type ScenarioInput } from "../../hw-sim/sim.js";
import { startSink } from "../support/uplink-harness.js";
import { testConfigInput } from "../support/config.js";
import { tcpDevice } from "../support/gateway.js";
import { testCert } from "../support/tls.js";

const CLI = resolve(fileURLToPath(import.meta.url), "../../../src/cli.js");
const MODELS = ["sunspec-storage", "sunspec-pv", "sunspec-meter"] as const;

function rssKb(pid: number, field: "VmRSS" | "VmHWM"): number {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) : NaN;
}

/** Resident memory once running steadily: the last of several samples; logs the trend and the peak. */
async function settle(child: ChildProcess, ms: number, log: (m: string) => void): Promise<number> {
  const samples: number[] = [];
  for (let t = 0; t < ms; t += ms / 6) {
    await new Promise((r) => setTimeout(r, ms / 6));
    samples.push(rssKb(child.pid!, "VmRSS"));
  }
  log(`RSS over time (MiB): ${samples.map((k) => (k / 1024).toFixed(0)).join(" ")}; peak ${(rssKb(child.pid!, "VmHWM") / 1024).toFixed(0)}`);
  return samples[samples.length - 1];
}

const bench: BenchFn = async (ctx) => {
  const runMs = ctx.quick ? 6000 : 30000;
  const ports = 5;
  const perPort = 10;
  const scenario: ScenarioInput = {
    seed: 3,
    control: { listen: "127.0.0.1:0" },
    site: { pv_irradiance: 0.5 },
    ports: Array.from({ length: ports }, (_, p) => ({
      kind: "tcp" as const,
      listen: "127.0.0.1:0",
      devices: Array.from({ length: perPort }, (_, u) => ({ unit: u + 1, model: MODELS[u % 3], name: `d${p}-${u}` })),
    })),
  };
  const sim = await startSim(scenario);
  const sink = await startSink();
  const devices = sim.tcpPorts.flatMap((port, p) => Array.from({ length: perPort }, (_, u) => tcpDevice(`d${p}-${u}`, port, u + 1)));
  const cfg = {
    ...testConfigInput(join(ctx.dir, "data")),
    log_level: "warn",
    partner: { headers: [], execution_url: `${sink.url}/exec`, data_push_url: sink.url, data_push_path: "telemetry", ca_file: testCert().certFile },
    devices,
  };
  const file = join(ctx.dir, "config.yaml");
  writeFileSync(file, stringify(cfg));
  const child = spawn(process.execPath, [CLI, "run", "--config", file], { stdio: "ignore" });
  const idle = spawn(process.execPath, ["-e", "setInterval(() => {}, 1000)"], { stdio: "ignore" });
  try {
    const ours = await settle(child, runMs, ctx.log);
    const ref = rssKb(idle.pid!, "VmRSS");
    const devicesSeen = new Set(sink.accepted().flatMap((r) => (r.body?.devices ?? []).map((d: { device_id: string }) => d.device_id)));
    ctx.log(`${devicesSeen.size} devices reached the partner in ${sink.accepted().length} pushes`);
    if (devicesSeen.size < 50) throw new Error(`only ${devicesSeen.size} of 50 devices reached the partner`);
    return [{ name: "resident memory, 50 devices", value: ours / 1024, unit: "MiB", reference: ref / 1024, ratio: ref / ours, note: "idle node process (lower is better)" }];
  } finally {
    child.kill("SIGTERM");
    idle.kill("SIGKILL");
    await new Promise((r) => child.once("exit", r));
    await sink.stop();
    await sim.stop();
  }
};
export default bench;
