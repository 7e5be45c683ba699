// The 50-device site of the memory bench and the soak run: a simulator with five TCP
// ports of ten devices, a partner sink, and `sitegate run` as a child process started
// exactly as systemd/sitegate.service starts it (its node flags and Environment= lines).
import type { ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { startSim, type ScenarioInput, type SimHandle } from "../../hw-sim/sim.js";
import { partnerTo, startSink, type PartnerSink } from "./partner-sink.js";
import { CLI, spawnDaemon, stopDaemon, writeConfig } from "./cli.js";
import { testConfigInput } from "./config.js";
import { tcpDevice } from "./gateway.js";

const ROOT = resolve(fileURLToPath(import.meta.url), "../../../..");
export { CLI };
const MODELS = ["sunspec-storage", "sunspec-pv", "sunspec-meter"] as const;

/** The node flags and environment of the unit's ExecStart (so a bench measures what ships). */
export function unitCommand(unitFile = join(ROOT, "systemd/sitegate.service")): { nodeArgs: string[]; env: Record<string, string> } {
  const lines = readFileSync(unitFile, "utf8").split("\n");
  const exec = lines.find((l) => l.startsWith("ExecStart="));
  if (!exec) throw new Error(`${unitFile} has no ExecStart=`);
  const words = exec.slice("ExecStart=".length).trim().split(/\s+/);
  const script = words.findIndex((w) => w.endsWith("/cli.js"));
  const env: Record<string, string> = {};
  for (const l of lines.filter((x) => x.startsWith("Environment="))) {
    for (const kv of l.slice("Environment=".length).trim().split(/\s+/)) {
      const i = kv.indexOf("=");
      if (i > 0) env[kv.slice(0, i)] = kv.slice(i + 1);
    }
  }
  return { nodeArgs: words.slice(1, script), env };
}

export function rssKb(pid: number, field: "VmRSS" | "VmHWM"): number {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) : NaN;
}

export interface Site50 {
  sim: SimHandle;
  sink: PartnerSink;
  child: ChildProcess;
  /** Device ids that reached the partner so far. */
  devicesSeen(): number;
  stop(): Promise<void>;
}

/** Starts the site and the daemon; `extraEnv` is added to the unit's environment. */
export async function startSite50(
  dir: string,
  opts: { nodeArgs?: string[]; extraEnv?: Record<string, string>; listen?: string; rateLimitPerMin?: number } = {},
): Promise<Site50> {
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
  const base = testConfigInput(join(dir, "data"));
  const cfg = {
    ...base,
    log_level: "warn",
    http: {
      ...base.http,
      listen: opts.listen ?? "127.0.0.1:0",
      ...(opts.rateLimitPerMin ? { rate_limit_per_min: opts.rateLimitPerMin } : {}),
    },
    partner: partnerTo(sink, { headers: [] }),
    devices,
  };
  const file = writeConfig(dir, cfg);
  const unit = unitCommand();
  const child = spawnDaemon(file, { nodeArgs: opts.nodeArgs ?? unit.nodeArgs, env: { ...unit.env, ...opts.extraEnv } });
  return {
    sim,
    sink,
    child,
    devicesSeen: () => new Set(sink.accepted().flatMap((r) => (r.body?.devices ?? []).map((d: { device_id: string }) => d.device_id))).size,
    async stop() {
      await stopDaemon(child);
      await sink.stop();
      await sim.stop();
    },
  };
}
