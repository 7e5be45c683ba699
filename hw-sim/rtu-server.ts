// Modbus RTU on a pseudo-terminal pair made with socat, standing in for an RS-485 bus.
// The simulator owns one end (`path`); the gateway opens the other (`peer`). A pty moves
// bytes instantly whatever the baud rate and carries no parity, so the line timing of a
// real bus is emulated here from the port's baud, parity and stop bits: character time,
// the 3.5-character silence, the device's turnaround.
import { spawn, type ChildProcess } from "node:child_process";
import { closeSync, constants, existsSync, openSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { SerialPort } from "serialport";
import type { Endpoint } from "./faults.js";
import { rtuFrame, takeRtuFrames } from "./modbus-pdu.js";
import { rtuBitsPerChar, type RtuPortSpec } from "./scenario.js";

const RESYNC_MS = 50;

export class RtuServer {
  private socat: ChildProcess | null = null;
  private port: SerialPort | null = null;
  private holdFd: number | null = null;
  private buf: Buffer = Buffer.alloc(0);
  private busyUntil = 0;
  private resync: NodeJS.Timeout | null = null;
  private chain: Promise<void> = Promise.resolve();
  private stopped = false;
  /** Frames dropped for a bad CRC or an unknown function (a real device ignores them). */
  badFrames = 0;

  constructor(
    private readonly endpoint: Endpoint,
    private readonly spec: RtuPortSpec & { path: string; peer: string },
  ) {}

  /** Milliseconds one character takes on the wire, from the port's framing (11 bits at 8E1). */
  get charMs(): number {
    return (rtuBitsPerChar(this.spec) * 1000) / this.spec.baud;
  }

  /** Inter-frame silence: 3.5 characters, fixed 1.75 ms above 19200 baud. */
  get silenceMs(): number {
    return this.spec.baud > 19200 ? 1.75 : 3.5 * this.charMs;
  }

  async start(): Promise<void> {
    const { path, peer } = this.spec;
    // The gateway's end is the simulator's group's too (0660): sitegate-sim.service runs as its
    // own user, and the gateway's user is a member of its group (packaging/sysusers.conf).
    const gatewayEnd = `pty,raw,echo=0,link=${peer},perm-late=0660,group-late=${process.getgid?.() ?? 0}`;
    const socat = spawn("socat", ["-d", "-d", `pty,raw,echo=0,link=${path}`, gatewayEnd], {
      stdio: ["ignore", "ignore", "pipe"],
    });
    this.socat = socat;
    let err = "";
    socat.stderr!.on("data", (d) => (err = (err + d).slice(-2000)));
    const exited = new Promise<never>((_, reject) => socat.once("exit", (c) => reject(new Error(`socat exited (${c}): ${err.trim()}`))));
    exited.catch(() => {});
    socat.once("error", () => {});
    for (let i = 0; !(existsSync(path) && existsSync(peer)); i++) {
      if (i > 250) throw new Error(`socat did not create ${path} and ${peer}: ${err.trim()}`);
      await Promise.race([sleep(20), exited]);
    }
    // Hold the gateway's end open so that socat keeps running when the gateway closes
    // and reopens the port (a pty master sees EIO once no slave descriptor is open).
    this.holdFd = openSync(peer, constants.O_RDWR | constants.O_NOCTTY | constants.O_NONBLOCK);
    const port = new SerialPort({
      path,
      baudRate: this.spec.baud,
      dataBits: 8,
      parity: this.spec.parity,
      stopBits: this.spec.stop_bits,
      autoOpen: false,
    });
    await new Promise<void>((resolve, reject) => port.open((e) => (e ? reject(e) : resolve())));
    port.on("data", (d: Buffer) => this.onData(d));
    port.on("error", () => {});
    this.port = port;
  }

  private onData(chunk: Buffer): void {
    this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
    if (this.resync) clearTimeout(this.resync);
    const { frames, rest, bad } = takeRtuFrames(this.buf);
    this.buf = rest;
    this.badFrames += bad;
    const arrived = performance.now();
    for (const frame of frames) this.chain = this.chain.then(() => this.answer(frame, arrived)).catch(() => {});
    // A partial frame followed by silence is line noise: drop it.
    if (this.buf.length) this.resync = setTimeout(() => (this.buf = Buffer.alloc(0)), RESYNC_MS);
  }

  private async answer(frame: Buffer, arrived: number): Promise<void> {
    const unit = frame.readUInt8(0);
    const pdu = frame.subarray(1, frame.length - 2);
    // Broadcast (unit 0) is never answered.
    const decision = unit === 0 ? { kind: "silent" as const } : this.endpoint.decide(unit, pdu, "silent");
    const timing = this.spec.line_timing;
    const start = Math.max(arrived, this.busyUntil);
    const requestEnd = start + (timing ? frame.length * this.charMs + this.silenceMs : 0);
    if (decision.kind !== "reply") {
      this.busyUntil = requestEnd;
      return;
    }
    const out = rtuFrame(unit, decision.pdu, decision.corrupt);
    const done = requestEnd + (timing ? this.spec.turnaround_ms + out.length * this.charMs : 0) + decision.delayMs;
    this.busyUntil = done + (timing ? this.silenceMs : 0);
    const wait = done - performance.now();
    if (wait > 0) await sleep(wait);
    if (!this.stopped && this.port?.isOpen) this.port.write(out);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.resync) clearTimeout(this.resync);
    const port = this.port;
    this.port = null;
    if (port?.isOpen) await new Promise<void>((r) => port.close(() => r()));
    if (this.holdFd !== null) {
      try {
        closeSync(this.holdFd);
      } catch {
        /* already gone */
      }
      this.holdFd = null;
    }
    const socat = this.socat;
    this.socat = null;
    if (socat && socat.exitCode === null) {
      const gone = new Promise((r) => socat.once("exit", r));
      socat.kill("SIGTERM");
      await Promise.race([gone, sleep(2000).then(() => socat.kill("SIGKILL"))]);
    }
  }
}
