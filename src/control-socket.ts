// The daemon's local control socket: `<data_dir>/control.sock`, a Unix socket of mode 0600
// owned by the daemon's user, so only that user (and root) can connect; nothing listens on
// the network for it. It serves one request, `dump DEVICE_ID`, so that `sitegate dump
// --config FILE DEVICE_ID` reads a device the daemon holds through the daemon's own bus
// queue (below polling) instead of opening a serial port the daemon has locked or a second
// connection to a TCP device the daemon polls. One JSON line in, one JSON line out, then the
// connection closes; one dump at a time; a request longer than 1 KiB or slower than 5 s is
// refused.
import { lstatSync, chmodSync, unlinkSync } from "node:fs";
import { createConnection, createServer, type Server, type Socket } from "node:net";
import { join } from "node:path";
import { SitegateError, errorMessage, isSitegateError } from "./errors.js";
import type { Part } from "./lifecycle.js";
import type { Logger } from "./log.js";
import type { Capture } from "./modbus/device/capture.js";

export const CONTROL_SOCKET = "control.sock";
const MAX_REQUEST = 1024;
/** A capture is some kilobytes; an answer past this is not one. */
const MAX_ANSWER = 32 * 1024 * 1024;
const REQUEST_TIMEOUT_MS = 5000;
const DEVICE_ID = /^[A-Za-z0-9._-]{1,64}$/;

export function controlSocketPath(dataDir: string): string {
  return join(dataDir, CONTROL_SOCKET);
}

/** What the socket can do: capture a device the daemon holds. */
export interface ControlOps {
  dump(deviceId: string): Promise<Capture>;
}

export type ControlAnswer = { ok: true; capture: Capture } | { ok: false; code: string; error: string };

/** A family that can capture its devices (the Modbus family). */
export function capturing<T extends object>(f: T): f is T & { capture(deviceId: string): Promise<Capture> } {
  return typeof (f as { capture?: unknown }).capture === "function";
}

export class ControlSocket implements Part {
  readonly name = "control-socket";
  private server: Server | null = null;
  private busy = false;

  constructor(
    private readonly dataDir: string,
    private readonly ops: ControlOps,
    private readonly log: Logger,
  ) {}

  get path(): string {
    return controlSocketPath(this.dataDir);
  }

  async start(): Promise<void> {
    const path = this.path;
    let stale = false;
    try {
      stale = lstatSync(path).isSocket();
      if (!stale) throw new SitegateError("INTERNAL", `${path} exists and is not a socket: move it away`);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
    }
    // A socket a daemon left behind; one a live daemon answers on is not taken over.
    if (stale) {
      if (await answers(path)) throw new SitegateError("INTERNAL", `another sitegate daemon answers on ${path}`);
      unlinkSync(path);
    }
    const server = createServer((conn) => this.serve(conn));
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(path, () => resolve());
    });
    chmodSync(path, 0o600);
    this.server = server;
    this.log.info({ path }, "control socket listening (dump only, this user only)");
  }

  async stop(): Promise<void> {
    const s = this.server;
    this.server = null;
    if (!s) return;
    await new Promise<void>((resolve) => s.close(() => resolve()));
  }

  private serve(conn: Socket): void {
    let got = "";
    conn.setTimeout(REQUEST_TIMEOUT_MS, () => conn.destroy());
    conn.setEncoding("utf8");
    conn.on("error", () => undefined); // a client gone mid-answer
    const answer = (a: ControlAnswer) => conn.end(JSON.stringify(a) + "\n");
    conn.on("data", (chunk: string) => {
      got += chunk;
      if (got.length > MAX_REQUEST) {
        answer({ ok: false, code: "INVALID_REQUEST", error: "request too long" });
        got = "";
        conn.removeAllListeners("data");
        return;
      }
      const nl = got.indexOf("\n");
      if (nl < 0) return;
      conn.removeAllListeners("data");
      conn.setTimeout(0);
      void this.handle(got.slice(0, nl)).then(answer);
    });
  }

  private async handle(line: string): Promise<ControlAnswer> {
    let req: { op?: unknown; device_id?: unknown };
    try {
      req = JSON.parse(line) as typeof req;
    } catch {
      return { ok: false, code: "INVALID_REQUEST", error: "not a JSON request" };
    }
    if (req.op !== "dump") return { ok: false, code: "INVALID_REQUEST", error: `unknown op ${JSON.stringify(req.op)}: only "dump"` };
    if (typeof req.device_id !== "string" || !DEVICE_ID.test(req.device_id))
      return { ok: false, code: "INVALID_REQUEST", error: "device_id must be 1..64 of A-Z a-z 0-9 . _ -" };
    if (this.busy) return { ok: false, code: "BUSY", error: "another dump is running; try again when it is done" };
    this.busy = true;
    const t0 = performance.now();
    try {
      const capture = await this.ops.dump(req.device_id);
      this.log.info({ device_id: req.device_id, ranges: capture.ranges.length, ms: Math.round(performance.now() - t0) }, "dump served");
      return { ok: true, capture };
    } catch (e) {
      return { ok: false, code: isSitegateError(e) ? e.code : "INTERNAL", error: errorMessage(e) };
    } finally {
      this.busy = false;
    }
  }
}

/** Whether a daemon answers on the socket (connects). */
function answers(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const c = createConnection(path);
    c.once("connect", () => {
      c.destroy();
      resolve(true);
    });
    c.once("error", () => resolve(false));
  });
}

/**
 * Asks the daemon at this socket for a device's capture. `null`: no daemon listens there
 * (no socket, or nobody accepts). A socket this user may not open is an error that says so.
 */
export function askDump(path: string, deviceId: string, timeoutMs: number): Promise<ControlAnswer | null> {
  return new Promise((resolve, reject) => {
    const c = createConnection(path);
    let buf = "";
    let connected = false;
    const timer = setTimeout(() => {
      c.destroy();
      reject(new SitegateError("TIMEOUT", `the daemon did not answer the dump within ${timeoutMs / 1000} s (${path})`));
    }, timeoutMs);
    c.setEncoding("utf8");
    c.once("connect", () => {
      connected = true;
      c.write(JSON.stringify({ op: "dump", device_id: deviceId }) + "\n");
    });
    c.on("data", (chunk: string) => {
      buf += chunk;
      if (buf.length <= MAX_ANSWER) return;
      clearTimeout(timer);
      c.destroy();
      reject(new SitegateError("PAYLOAD_TOO_LARGE", `the daemon's answer on ${path} is over ${MAX_ANSWER} bytes`));
    });
    c.once("end", () => {
      clearTimeout(timer);
      try {
        resolve(JSON.parse(buf) as ControlAnswer);
      } catch {
        reject(new SitegateError("INTERNAL", `the daemon's answer on ${path} is not JSON`));
      }
    });
    c.once("error", (e: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      if (!connected && (e.code === "ENOENT" || e.code === "ECONNREFUSED")) return resolve(null);
      if (e.code === "EACCES")
        return reject(
          new SitegateError(
            "FORBIDDEN",
            `${path}: permission denied; the daemon's control socket is its user's: run as that user (sudo -u sitegate /usr/bin/sitegate dump ...)`,
          ),
        );
      reject(new SitegateError("INTERNAL", `${path}: ${e.message}`));
    });
  });
}
