// A full RS-485 bus: 8 SDM630 meters and 2 SunSpec PV inverters on one serial line (a
// socat pty pair, the simulator as its own process with its line timing on: character
// time from the framing, 3.5-character silences, 5 ms device turnaround), at 9600 8N1 and
// 19200 8E1. The gateway's real poll path (paired drivers, planned blocks, every device's
// reads queued on the bus at once, as the poller does at each tick) runs cycle after cycle.
// Rows per framing:
// - the shortest poll cycle it sustains (mean of back-to-back cycles) against the line-rate
//   minimum for the same frames (lower is better, so the ratio is line / ours);
// - registers read per cycle against the registers the points need (what coalescing costs),
//   and the line minimum of the planned reads against reading only the registers needed
//   (what coalescing saves);
// - SDM630 meters per bus at a 1, 5 and 10 s poll, from their line time at the measured ratio.
// The line minimum per request: (8 request chars + 5 + 2 x registers response chars) x
// bits per char / baud, two 3.5-char silences (after the request and after the answer),
// the device turnaround. Bits per char: 10 at 8N1, 11 at 8E1 (start, 8 data, parity, stop).
import { spawnSim, type SimProcess } from "../support/sim-process.js";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { BenchFn, BenchRow } from "./types.js";
import { Bus } from "../../src/modbus/bus.js";
import { lineTiming, type Parity } from "../../src/modbus/endpoint.js";
import { planBlocks, type Block, type Range } from "../../src/modbus/planner.js";
import { DeviceDriver, type PointClass } from "../../src/modbus/device/driver.js";
import { builtinProfiles } from "../../src/profiles/registry.js";
import { silentLogger } from "../../src/log.js";

export const TURNAROUND_MS = 5;
export const METERS = 8;
export const INVERTERS = 2;

/** Wire time of one read request and its answer, silences and turnaround included (ms). */
export function requestLineMs(
  block: Pick<Block, "table" | "count">,
  baud: number,
  bitsPerChar: number,
  turnaroundMs = TURNAROUND_MS,
): number {
  const charMs = (bitsPerChar * 1000) / baud;
  const silence = baud > 19200 ? 1.75 : 3.5 * charMs;
  const bits = block.table === "coil" || block.table === "discrete";
  const data = bits ? Math.ceil(block.count / 8) : 2 * block.count;
  return (8 + 5 + data) * charMs + 2 * silence + turnaroundMs;
}

/** Registers the points need (overlaps counted once) and registers the blocks read. */
export function coalescing(ranges: readonly Range[], blocks: readonly Block[]): { needed: number; read: number } {
  const need = new Set<string>();
  for (const r of ranges) for (let i = 0; i < r.count; i++) need.add(`${r.table}:${r.address + i}`);
  return { needed: need.size, read: blocks.reduce((a, b) => a + b.count, 0) };
}

/** The simulator of one full bus as its own process; resolves once it listens. */
export async function startBusSim(dir: string, baud: number, parity: Parity, meters = METERS, inverters = INVERTERS): Promise<SimProcess> {
  const devices = [
    ...Array.from({ length: meters }, (_, i) => ({ unit: i + 1, model: "sdm630", name: `meter${i + 1}` })),
    ...Array.from({ length: inverters }, (_, i) => ({ unit: meters + i + 1, model: "sunspec-pv", name: `pv${i + 1}` })),
  ];
  return spawnSim(dir, {
    seed: 1,
    control: { listen: "127.0.0.1:0" },
    site: { pv_irradiance: 0.5 },
    ports: [{ kind: "rtu", path: "sim", peer: "gw", baud, parity, stop_bits: 1, turnaround_ms: TURNAROUND_MS, devices }],
  });
}

export interface BusFigures {
  cycleMs: number;
  cycles: number;
  lineMs: number;
  /** The line minimum if only the registers needed were read (no gap read through). */
  exactLineMs: number;
  exactRequests: number;
  needed: number;
  read: number;
  requests: number;
  failures: number;
}

/** Polls every device of the bus cycle after cycle for `ms`, as the poller's tick does. */
export async function measureBus(bus: Bus, drivers: DeviceDriver[], classes: PointClass[], ms: number): Promise<BusFigures> {
  const t = bus.timing!;
  const baud = bus.endpoint.kind === "rtu" ? bus.endpoint.baud : 0;
  let lineMs = 0;
  let exactLineMs = 0;
  let exactRequests = 0;
  let needed = 0;
  let read = 0;
  let requests = 0;
  for (const d of drivers) {
    const plan = d.plan(classes);
    const c = coalescing(plan.ranges, plan.blocks);
    needed += c.needed;
    read += c.read;
    requests += plan.blocks.length;
    for (const b of plan.blocks) lineMs += requestLineMs(b, baud, t.bitsPerChar);
    const exact = planBlocks(plan.ranges, { maxRegs: d.profile.max_read_regs, maxGap: 0 });
    exactRequests += exact.length;
    for (const b of exact) exactLineMs += requestLineMs(b, baud, t.bitsPerChar);
  }
  const cycle = () => Promise.all(drivers.map((d) => d.read(classes)));
  await cycle(); // warm
  const failuresBefore = bus.stats.failures;
  let n = 0;
  const t0 = performance.now();
  while (performance.now() - t0 < ms || n < 3) {
    await cycle();
    n++;
  }
  const cycleMs = (performance.now() - t0) / n;
  return { cycleMs, cycles: n, lineMs, exactLineMs, exactRequests, needed, read, requests, failures: bus.stats.failures - failuresBefore };
}

const bench: BenchFn = async (ctx) => {
  const ms = ctx.quick ? 3000 : 15000;
  const rows: BenchRow[] = [];
  const profiles = builtinProfiles();
  for (const [baud, parity] of [
    [9600, "none"],
    [19200, "even"],
  ] as const) {
    const framing = `${baud} 8${parity[0].toUpperCase()}1`;
    const dir = mkdtempSync(join(tmpdir(), "sitegate-bench-bus-"));
    const sim = await startBusSim(dir, baud, parity);
    try {
      const endpoint = { kind: "rtu" as const, path: join(dir, "gw"), baud, parity, stopBits: 1 as const };
      const bus = new Bus(endpoint, silentLogger());
      const drivers = [
        ...Array.from({ length: METERS }, (_, i) => new DeviceDriver(bus, i + 1, profiles.get("sdm630"))),
        ...Array.from({ length: INVERTERS }, (_, i) => new DeviceDriver(bus, METERS + i + 1, profiles.get("sunspec"))),
      ];
      for (const d of drivers) await d.pair();
      ctx.log(
        `${framing}: ${lineTiming(endpoint).bitsPerChar} bits/char, silence ${bus.gapMs.toFixed(2)} ms, planner gap ${lineTiming(endpoint).gapRegs} registers`,
      );
      for (const classes of [["fast"], ["fast", "slow"]] as PointClass[][]) {
        const f = await measureBus(bus, drivers, classes, classes.length === 1 ? ms : Math.max(2000, ms / 3));
        const what = classes.length === 1 ? "power points" : "all points";
        ctx.log(
          `${framing} ${what}: ${f.cycles} cycles, ${f.cycleMs.toFixed(1)} ms each, line minimum ${f.lineMs.toFixed(1)} ms, ${f.requests} requests, ${f.read} registers read for ${f.needed} needed (${f.exactRequests} requests and ${f.exactLineMs.toFixed(1)} ms of line without reading through gaps), ${f.failures} failures`,
        );
        if (f.failures) throw new Error(`${f.failures} failed reads on a healthy bus`);
        rows.push({
          name: `full bus ${framing}, 8 SDM630 + 2 PV, poll cycle (${what})`,
          value: f.cycleMs,
          unit: "ms",
          reference: f.lineMs,
          ratio: f.lineMs / f.cycleMs,
          note: `line minimum, same ${f.requests} frames, ${lineTiming(endpoint).bitsPerChar} bits/char, 3.5-char gaps, 5 ms turnaround`,
        });
        rows.push({
          name: `full bus ${framing}, registers per cycle (${what})`,
          value: f.read,
          unit: "registers",
          reference: f.needed,
          ratio: f.needed / f.read,
          note: "registers the points need (lower is better)",
        });
        rows.push({
          name: `full bus ${framing}, line minimum of the plan (${what})`,
          value: f.lineMs,
          unit: "ms",
          reference: f.exactLineMs,
          ratio: f.exactLineMs / f.lineMs,
          note: `reading only the registers needed, ${f.exactRequests} requests (lower is better)`,
        });
      }
      // Sizing: SDM630 meters alone on such a bus, every point every cycle (the slow energy
      // counters included, so the tick that reads them still fits), at the measured ratio.
      const meter = drivers[0]
        .plan(["fast", "slow"])
        .blocks.reduce((a, b) => a + requestLineMs(b, baud, lineTiming(endpoint).bitsPerChar), 0);
      const pv = drivers[METERS]
        .plan(["fast", "slow"])
        .blocks.reduce((a, b) => a + requestLineMs(b, baud, lineTiming(endpoint).bitsPerChar), 0);
      const ratio = Math.min(1, rows[rows.length - 3].ratio ?? 1);
      ctx.log(
        `${framing}: line time per cycle ${meter.toFixed(1)} ms per SDM630, ${pv.toFixed(1)} ms per SunSpec PV inverter (all points)`,
      );
      for (const period of [1, 5, 10]) {
        const fit = Math.min(247, Math.floor((period * 1000 * ratio) / meter));
        rows.push({
          name: `full bus ${framing}, SDM630 meters per bus at ${period} s`,
          value: fit,
          unit: "meters",
          reference: null,
          ratio: null,
          note: `${meter.toFixed(0)} ms line time each, at the measured ratio`,
        });
      }
      await bus.close();
    } finally {
      await sim.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  }
  return rows;
};
export default bench;
