// withSite(scenario, async (site) => ...): a real simulator for one test, always stopped.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startSim, type ScenarioInput, type SimHandle } from "../../hw-sim/sim.js";

export type { SimHandle, ScenarioInput };

/**
 * Where SunSpec storage model 124 starts in the simulator's battery: 40002 + the lengths of
 * models 1, 103, 120 and 123 (68 + 52 + 28 + 26). WChaMax +2, StorCtl_Mod +5, OutWRte +12.
 */
export const M124 = 40176;

/**
 * Starts the simulator on free ports (use "127.0.0.1:0" in the scenario) with RTU pty
 * paths resolved inside a fresh temp dir, runs fn, then stops it whatever happens.
 */
export async function withSite<T>(scenario: ScenarioInput, fn: (site: SimHandle) => Promise<T>): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), "sitegate-sim-"));
  const site = await startSim(scenario, { baseDir: dir });
  try {
    return await fn(site);
  } finally {
    await site.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A call to the simulator's control API (faults, GPIO, Zigbee, state): the status and the JSON answer. */
export async function control(site: SimHandle, method: string, path: string, body?: unknown): Promise<{ status: number; json: any }> {
  const res = await fetch(site.controlUrl + path, {
    method,
    body: body === undefined ? undefined : JSON.stringify(body),
    headers: { "content-type": "application/json" },
  });
  return { status: res.status, json: await res.json().catch(() => null) };
}

/** The demo site of hw-sim/scenarios/demo-site.yaml on free ports and temp ptys. */
export function demoScenario(
  over: { baud?: number; line_timing?: boolean; turnaround_ms?: number; pv_irradiance?: number } = {},
): ScenarioInput {
  return {
    seed: 7,
    control: { listen: "127.0.0.1:0" },
    site: { base_load_w: 2000, load_noise_pct: 0, pv_irradiance: over.pv_irradiance ?? 0.5 },
    ports: [
      {
        kind: "tcp",
        listen: "127.0.0.1:0",
        devices: [
          { unit: 1, model: "sunspec-storage", name: "battery", max_power_w: 5000, capacity_wh: 10000, soc_pct: 50 },
          { unit: 2, model: "sunspec-pv", name: "pv", max_power_w: 6000 },
          { unit: 3, model: "sunspec-meter", name: "grid" },
        ],
      },
      {
        kind: "rtu",
        path: "ttySIM",
        peer: "ttyGW",
        baud: over.baud ?? 9600,
        line_timing: over.line_timing ?? true,
        turnaround_ms: over.turnaround_ms ?? 5,
        devices: [
          { unit: 10, model: "sdm630", name: "sdm" },
          { unit: 11, model: "relay", name: "relay", coils: 4, load_per_coil_w: 500 },
        ],
      },
    ],
  };
}

/** The TCP-only part of the demo site (no socat needed). */
export function tcpScenario(pv_irradiance = 0.5): ScenarioInput {
  const s = demoScenario({ pv_irradiance });
  return { ...s, ports: [s.ports[0]] };
}
