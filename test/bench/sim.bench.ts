// The simulator's own Modbus TCP request rate, against modbus-serial's ServerTCP serving
// the same reads in the same run: the simulator must never be what limits a gateway bench.
import { connect, type Socket } from "node:net";
import ModbusRTU from "modbus-serial";
import type { BenchFn } from "./types.js";
import { startSim } from "../../hw-sim/sim.js";

/** Request/response loops over `conns` connections for `ms`; returns requests per second. */
async function hammer(port: number, unit: number, address: number, ms: number, conns: number): Promise<number> {
  const one = async (): Promise<number> => {
    const sock: Socket = connect(port, "127.0.0.1");
    sock.setNoDelay(true);
    await new Promise<void>((r, j) => sock.once("connect", () => r()).once("error", j));
    const req = Buffer.from([0, 0, 0, 0, 0, 6, unit, 3, address >> 8, address & 0xff, 0, 10]);
    let n = 0;
    let buf = Buffer.alloc(0);
    const end = performance.now() + ms;
    await new Promise<void>((resolve) => {
      sock.on("data", (d) => {
        buf = Buffer.concat([buf, d]);
        while (buf.length >= 6 && buf.length >= 6 + buf.readUInt16BE(4)) {
          buf = buf.subarray(6 + buf.readUInt16BE(4));
          n++;
          if (performance.now() >= end) return resolve();
          req.writeUInt16BE(n & 0xffff, 0);
          sock.write(req);
        }
      });
      sock.write(req);
    });
    sock.destroy();
    return n;
  };
  const t0 = performance.now();
  const counts = await Promise.all(Array.from({ length: conns }, one));
  return (counts.reduce((a, b) => a + b, 0) * 1000) / (performance.now() - t0);
}

const bench: BenchFn = async (ctx) => {
  const ms = ctx.quick ? 400 : 3000;
  const sim = await startSim({
    seed: 1,
    control: { listen: "127.0.0.1:0" },
    ports: [{ kind: "tcp", listen: "127.0.0.1:0", devices: [{ unit: 1, model: "sunspec-storage", name: "battery" }] }],
  });
  const regs = new Array(200).fill(0).map((_, i) => i);
  const ref = new ModbusRTU.ServerTCP(
    { getHoldingRegister: (addr: number) => regs[addr % 200] },
    { host: "127.0.0.1", port: 0, unitID: 1 },
  );
  await new Promise((r) => ref.on("initialized", r));
  const refPort = ((ref as unknown as { _server: import("node:net").Server })._server.address() as { port: number }).port;
  try {
    const ours1 = await hammer(sim.tcpPorts[0], 1, 40000, ms, 1);
    const theirs1 = await hammer(refPort, 1, 0, ms, 1);
    const ours4 = await hammer(sim.tcpPorts[0], 1, 40000, ms, 4);
    const theirs4 = await hammer(refPort, 1, 0, ms, 4);
    return [
      {
        name: "sim TCP requests/s, 1 connection",
        value: ours1,
        unit: "req/s",
        reference: theirs1,
        ratio: ours1 / theirs1,
        note: "modbus-serial ServerTCP",
      },
      {
        name: "sim TCP requests/s, 4 connections",
        value: ours4,
        unit: "req/s",
        reference: theirs4,
        ratio: ours4 / theirs4,
        note: "modbus-serial ServerTCP",
      },
    ];
  } finally {
    await sim.stop();
    await new Promise<void>((r) => ref.close(() => r()));
  }
};
export default bench;
