// Modbus engine figures against references measured in the same run:
// - TCP poll throughput (registers/s) of the real poll path vs mbpoll (Debian) reading
//   125-register blocks from the same simulator at its fastest poll period;
// - RTU bus efficiency vs the theoretical line rate at 9600 and 115200 baud, with the
//   simulator's line timing on (8N1, 5 ms device turnaround).
import { spawnSim, type SimProcess } from "../support/sim-process.js";
import { spawn } from "node:child_process";
import ModbusRTU from "modbus-serial";
import type { BenchFn, BenchRow } from "./types.js";
import { startSim } from "../../hw-sim/sim.js";
import { Bus } from "../../src/modbus/bus.js";
import { DeviceDriver } from "../../src/modbus/device/driver.js";
import { builtinProfiles } from "../../src/profiles/registry.js";
import { silentLogger } from "../../src/log.js";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** Registers/s mbpoll gets over `ms`: its polls counted from its output. */
async function mbpollRate(port: number, ms: number): Promise<number> {
  const child = spawn(
    "mbpoll",
    ["-m", "tcp", "-p", String(port), "-a", "1", "-t", "4", "-r", "40001", "-c", "125", "-l", "11", "127.0.0.1"],
    { stdio: ["ignore", "pipe", "ignore"] },
  );
  let polls = 0;
  let first = 0;
  let last = 0;
  let buf = "";
  child.stdout.on("data", (d: Buffer) => {
    buf += d.toString();
    let i;
    while ((i = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      if (line.startsWith("[40125]:")) {
        polls++;
        last = performance.now();
        if (polls === 1) first = last;
      }
    }
  });
  await new Promise((r) => setTimeout(r, ms));
  child.kill("SIGINT");
  await new Promise((r) => child.once("exit", r));
  return polls > 1 ? ((polls - 1) * 125 * 1000) / (last - first) : 0;
}

/** Registers/s of the real poll path: the SunSpec battery's planned blocks, read again and again. */
async function pollRate(bus: Bus, unit: number, ms: number): Promise<number> {
  const d = new DeviceDriver(bus, unit, builtinProfiles().get("sunspec"));
  await d.pair();
  const regs = d.plan(["fast", "slow"]).blocks.reduce((a, b) => a + b.count, 0);
  await d.read(["fast", "slow"]);
  let n = 0;
  const t0 = performance.now();
  while (performance.now() - t0 < ms) {
    await d.read(["fast", "slow"]);
    n++;
  }
  return (n * regs * 1000) / (performance.now() - t0);
}

/** 125-register reads back to back on an RTU bus. */
async function rtuRate(bus: Bus, ms: number): Promise<number> {
  await bus.read(1, "holding", 40000, 125);
  let n = 0;
  const t0 = performance.now();
  while (performance.now() - t0 < ms) {
    await bus.read(1, "holding", 40000, 125, { timeoutMs: 2000 });
    n++;
  }
  return (n * 125 * 1000) / (performance.now() - t0);
}

type Client = InstanceType<typeof ModbusRTU.default>;

/** 125-register reads back to back with modbus-serial alone (no queue, no gap, no decoding). */
async function bareRate(connect: (c: Client) => Promise<void>, ms: number): Promise<number> {
  const c = new ModbusRTU.default();
  await connect(c);
  c.setID(1);
  c.setTimeout(2000);
  await c.readHoldingRegisters(40000, 125);
  let n = 0;
  const t0 = performance.now();
  while (performance.now() - t0 < ms) {
    await c.readHoldingRegisters(40000, 125);
    n++;
  }
  const rate = (n * 125 * 1000) / (performance.now() - t0);
  await new Promise<void>((r) => c.close(() => r()));
  return rate;
}

/** Registers/s the wire allows for 125-register reads: request 8 + response 255 characters, two silences, turnaround. */
export function lineRate(baud: number, bitsPerChar = 10, turnaroundMs = 5): number {
  const ct = (bitsPerChar * 1000) / baud;
  const silence = baud > 19200 ? 1.75 : 3.5 * ct;
  return (125 * 1000) / ((8 + 255) * ct + 2 * silence + turnaroundMs);
}

const bench: BenchFn = async (ctx) => {
  const ms = ctx.quick ? 1500 : 6000;
  const rows: BenchRow[] = [];
  const sim = await startSim({
    seed: 1,
    control: { listen: "127.0.0.1:0" },
    ports: [{ kind: "tcp", listen: "127.0.0.1:0", devices: [{ unit: 1, model: "sunspec-storage", name: "battery" }] }],
  });
  try {
    const theirs = await mbpollRate(sim.tcpPorts[0], ms);
    const bus = new Bus({ kind: "tcp", host: "127.0.0.1", port: sim.tcpPorts[0] }, silentLogger());
    const ours = await pollRate(bus, 1, ms);
    await bus.close();
    rows.push({
      name: "TCP poll throughput",
      value: ours,
      unit: "registers/s",
      reference: theirs,
      ratio: ours / theirs,
      note: "mbpoll -c 125 -l 11 (its fastest)",
    });
    // mbpoll cannot poll faster than every 11 ms, so it says little about the engine itself.
    // The poll path above reads only the 52 registers the profile needs (two requests), so
    // compare the bus with a bare modbus-serial loop on the same request shape: 125 registers.
    const bare = await bareRate((c) => c.connectTCP("127.0.0.1", { port: sim.tcpPorts[0] }), ms);
    const bus125 = new Bus({ kind: "tcp", host: "127.0.0.1", port: sim.tcpPorts[0] }, silentLogger());
    await bus125.read(1, "holding", 40000, 125);
    let n = 0;
    const t0 = performance.now();
    while (performance.now() - t0 < ms) {
      await bus125.read(1, "holding", 40000, 125);
      n++;
    }
    const busRate = (n * 125 * 1000) / (performance.now() - t0);
    await bus125.close();
    rows.push({
      name: "TCP bus, 125-register reads",
      value: busRate,
      unit: "registers/s",
      reference: bare,
      ratio: busRate / bare,
      note: "bare modbus-serial read loop, same reads",
    });
  } finally {
    await sim.stop();
  }
  // The simulator runs as its own process, as on a bench: no shared event loop with the gateway.
  for (const baud of [9600, 115200]) {
    const dir = mkdtempSync(join(tmpdir(), "sitegate-bench-rtu-"));
    let sim: SimProcess | undefined;
    try {
      sim = await spawnSim(dir, {
        seed: 1,
        control: { listen: "127.0.0.1:0" },
        ports: [
          {
            kind: "rtu",
            path: "sim",
            peer: "gw",
            baud,
            turnaround_ms: 5,
            devices: [{ unit: 1, model: "sunspec-storage", name: "battery" }],
          },
        ],
      });
      const bus = new Bus({ kind: "rtu", path: join(dir, "gw"), baud, parity: "none", stopBits: 1 }, silentLogger());
      const got = await rtuRate(bus, baud === 9600 ? Math.max(ms, 3000) : ms);
      await bus.close();
      const ideal = lineRate(baud);
      rows.push({
        name: `RTU bus efficiency ${baud} baud`,
        value: got,
        unit: "registers/s",
        reference: ideal,
        ratio: got / ideal,
        note: "line rate, 8N1, 5 ms turnaround",
      });
      if (baud === 115200) {
        // What a bare modbus-serial loop gets over the same pty: the part of the gap to the
        // line rate that is the pty and the event loops, not our bus.
        const bare = await bareRate((c) => c.connectRTUBuffered(join(dir, "gw"), { baudRate: baud }), ms);
        rows.push({
          name: `RTU ${baud} baud, bus vs bare client`,
          value: got,
          unit: "registers/s",
          reference: bare,
          ratio: got / bare,
          note: "bare modbus-serial read loop, same pty",
        });
      }
    } finally {
      await sim?.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  }
  return rows;
};
export default bench;
