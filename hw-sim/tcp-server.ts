// Modbus TCP server with its own MBAP framing on node:net: several unit ids per port,
// requests on one connection answered in order, one at a time, as most devices do.
import { createServer, type Server, type Socket } from "node:net";
import type { Endpoint } from "./faults.js";
import { requestPduLength, rtuFrame, takeRtuFrames } from "./modbus-pdu.js";

const MAX_BUFFER = 64 * 1024;

export class TcpServer {
  private server: Server | null = null;
  private readonly sockets = new Set<Socket>();
  port = 0;

  /** `framing: "rtu"` serves RTU frames over TCP, as a serial-to-Ethernet converter does. */
  constructor(
    private readonly endpoint: Endpoint,
    private readonly host: string,
    private readonly wantPort: number,
    private readonly framing: "mbap" | "rtu" = "mbap",
  ) {}

  async start(): Promise<void> {
    const server = createServer((s) => {
      this.endpoint.connected();
      if (this.framing === "rtu") this.serveRtu(s);
      else this.serve(s);
    });
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(this.wantPort, this.host, () => {
        server.off("error", reject);
        resolve();
      });
    });
    const addr = server.address();
    this.port = typeof addr === "object" && addr ? addr.port : this.wantPort;
  }

  private serve(sock: Socket): void {
    const connectedAt = Date.now(); // a device that wakes slowly counts from here (faults.ts)
    this.sockets.add(sock);
    sock.setNoDelay(true);
    let buf: Buffer = Buffer.alloc(0);
    const queue: Buffer[] = [];
    let busy = false;
    const pump = async () => {
      if (busy) return;
      busy = true;
      while (queue.length && !sock.destroyed) {
        const adu = queue.shift()!;
        const unit = adu.readUInt8(6);
        const decision = this.endpoint.decide(unit, adu.subarray(7), "gateway_exception", connectedAt);
        if (decision.kind === "silent") continue;
        if (decision.kind === "drop") {
          sock.destroy();
          break;
        }
        if (decision.delayMs > 0) await new Promise((r) => setTimeout(r, decision.delayMs));
        if (sock.destroyed) break;
        const out = Buffer.alloc(7 + decision.pdu.length);
        adu.copy(out, 0, 0, 4); // transaction id, protocol id
        out.writeUInt16BE(decision.pdu.length + 1, 4);
        out[6] = unit;
        decision.pdu.copy(out, 7);
        // A "crc" fault on TCP (no CRC there): a corrupted header, the transaction id
        // does not match the request, so the client must reject the frame.
        if (decision.corrupt) out.writeUInt16BE(out.readUInt16BE(0) ^ 0x5a5a, 0);
        sock.write(out);
      }
      busy = false;
    };
    sock.on("data", (chunk) => {
      buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
      while (buf.length >= 8) {
        const len = buf.readUInt16BE(4);
        if (buf.readUInt16BE(2) !== 0 || len < 2 || len > 254) {
          sock.destroy(); // not Modbus: a real device closes the connection
          return;
        }
        if (buf.length < 6 + len) break;
        const adu = buf.subarray(0, 6 + len);
        const expect = requestPduLength(adu, 7);
        if (expect > 0 && expect !== len - 1) {
          sock.destroy();
          return;
        }
        queue.push(adu);
        buf = buf.subarray(6 + len);
      }
      if (buf.length > MAX_BUFFER) sock.destroy();
      void pump();
    });
    sock.on("error", () => sock.destroy());
    sock.on("close", () => this.sockets.delete(sock));
  }

  private serveRtu(sock: Socket): void {
    const connectedAt = Date.now();
    this.sockets.add(sock);
    sock.setNoDelay(true);
    let buf: Buffer = Buffer.alloc(0);
    let chain: Promise<void> = Promise.resolve();
    sock.on("data", (chunk) => {
      const got = takeRtuFrames(buf.length ? Buffer.concat([buf, chunk]) : chunk);
      buf = got.rest;
      if (buf.length > MAX_BUFFER) return void sock.destroy();
      for (const frame of got.frames) {
        chain = chain.then(async () => {
          const unit = frame.readUInt8(0);
          const d = this.endpoint.decide(unit, frame.subarray(1, frame.length - 2), "silent", connectedAt);
          if (d.kind === "silent") return;
          if (d.kind === "drop") return void sock.destroy();
          if (d.delayMs > 0) await new Promise((r) => setTimeout(r, d.delayMs));
          if (!sock.destroyed) sock.write(rtuFrame(unit, d.pdu, d.corrupt));
        });
      }
    });
    sock.on("error", () => sock.destroy());
    sock.on("close", () => this.sockets.delete(sock));
  }

  /** Drops every open connection (the "drop" fault closes the one it hits). */
  dropAll(): void {
    for (const s of this.sockets) s.destroy();
  }

  async stop(): Promise<void> {
    this.dropAll();
    const server = this.server;
    this.server = null;
    if (server) await new Promise<void>((r) => server.close(() => r()));
  }
}
