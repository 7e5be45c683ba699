// A full site of brand devices on one RS-485 bus: the RTU port of the brands site
// (hw-sim/models/brands/site.ts, from the brand table)
// (Sungrow, Huawei, SolarEdge, Deye (three- and single-phase) and GoodWe hybrids, SDM72, SDM120 and EM340 meters,
// and the devices no profile describes, which are not polled) at 9600 8N1, the simulator
// as its own process with its line timing on. The gateway's real poll path (paired
// drivers by their built-in profiles, planned blocks, every device's reads queued on the
// bus at once) runs cycle after cycle, as rtu-bus.bench.ts does for SDM630 meters.
// Rows: the poll cycle against the line minimum of the same frames, and the requests per
// cycle against the requests of reading only the registers the points need. Line minimum
// per request: rtu-bus.bench.ts's requestLineMs.
import { spawnSim, type SimProcess } from "../support/sim-process.js";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { BenchFn, BenchRow } from "./types.js";
import { Bus } from "../../src/modbus/bus.js";
import { lineTiming } from "../../src/modbus/endpoint.js";
import { DeviceDriver, type PointClass } from "../../src/modbus/device/driver.js";
import { builtinProfiles } from "../../src/profiles/registry.js";
import { silentLogger } from "../../src/log.js";
import { parseScenario } from "../../hw-sim/scenario.js";
import { brandPlacements, brandsScenario } from "../../hw-sim/models/brands/site.js";
import { measureBus, requestLineMs } from "./rtu-bus.bench.js";

/** The profile that polls each device of the bus (its model's, or the one its placement names); the others match no profile. */
const PROFILE_OF: Record<string, string> = Object.fromEntries(
  brandPlacements()
    .filter((d) => d.placement.bus === "rtu" && d.placement.profile !== false)
    .map((d) => [d.placement.name, typeof d.placement.profile === "string" ? d.placement.profile : d.model]),
);

const bench: BenchFn = async (ctx) => {
  const ms = ctx.quick ? 3000 : 15000;
  const rows: BenchRow[] = [];
  const port = parseScenario(brandsScenario()).ports.find((p) => p.kind === "rtu");
  if (!port || port.kind !== "rtu") throw new Error("the brands site has no RS-485 port");
  const { baud, parity } = port;
  const framing = `${baud} 8${parity[0].toUpperCase()}${port.stop_bits}`;
  const dir = mkdtempSync(join(tmpdir(), "sitegate-bench-brands-"));
  let sim: SimProcess | undefined;
  try {
    sim = await spawnSim(dir, {
      seed: 3,
      control: { listen: "127.0.0.1:0" },
      site: { base_load_w: 3500, load_noise_pct: 0, pv_irradiance: 0.4 },
      ports: [{ ...port, path: "sim", peer: "gw" }],
    });
    const endpoint = { kind: "rtu" as const, path: join(dir, "gw"), baud, parity, stopBits: port.stop_bits };
    const bus = new Bus(endpoint, silentLogger());
    const profiles = builtinProfiles();
    const drivers = port.devices
      .filter((d) => d.name in PROFILE_OF)
      .map((d) => new DeviceDriver(bus, d.unit, profiles.get(PROFILE_OF[d.name])));
    for (const d of drivers) await d.pair();
    const bits = lineTiming(endpoint).bitsPerChar;
    for (const d of drivers) {
      const blocks = d.plan(["fast", "slow"]).blocks;
      const line = blocks.reduce((a, b) => a + requestLineMs(b, baud, bits, port.turnaround_ms), 0);
      ctx.log(`brands ${framing}: ${d.profile.name} (unit ${d.unit}) ${blocks.length} reads, ${line.toFixed(0)} ms of line (all points)`);
    }
    for (const classes of [["fast"], ["fast", "slow"]] as PointClass[][]) {
      const f = await measureBus(bus, drivers, classes, classes.length === 1 ? ms : Math.max(2000, ms / 3));
      const what = classes.length === 1 ? "power points" : "all points";
      ctx.log(
        `brands ${framing} ${what}: ${drivers.length} devices, ${f.cycles} cycles, ${f.cycleMs.toFixed(1)} ms each, line minimum ${f.lineMs.toFixed(1)} ms, ${f.requests} requests (${f.exactRequests} reading only what is needed), ${f.read} registers read for ${f.needed} needed, ${f.failures} failures`,
      );
      if (f.failures) throw new Error(`${f.failures} failed reads on a healthy bus`);
      rows.push({
        name: `brand site bus ${framing}, ${drivers.length} devices, poll cycle (${what})`,
        value: f.cycleMs,
        unit: "ms",
        reference: f.lineMs,
        ratio: f.lineMs / f.cycleMs,
        note: `line minimum, same ${f.requests} frames, ${bits} bits/char, 3.5-char gaps, ${port.turnaround_ms} ms turnaround`,
      });
      rows.push({
        name: `brand site bus ${framing}, requests per cycle (${what})`,
        value: f.requests,
        unit: "requests",
        reference: f.exactRequests,
        ratio: f.exactRequests / f.requests,
        note: "requests reading only the registers the points need (lower is better)",
      });
    }
    await bus.close();
  } finally {
    await sim?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  return rows;
};
export default bench;
