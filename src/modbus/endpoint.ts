// Where a bus is: tcp://HOST:PORT, rtu:/dev/ttyX?baud=9600[&parity=none&stop=1],
// rtu-tcp://HOST:PORT (RTU framing over a TCP serial server). One endpoint = one
// physical bus = one Bus object.
import { SitegateError } from "../errors.js";
import { rtuGapRegs } from "./planner.js";

export type Parity = "none" | "even" | "odd";
export type RtuEndpoint = { kind: "rtu"; path: string; baud: number; parity: Parity; stopBits: 1 | 2 };
export type Endpoint = { kind: "tcp"; host: string; port: number } | { kind: "rtu-tcp"; host: string; port: number } | RtuEndpoint;

export function endpointKey(e: Endpoint): string {
  return e.kind === "rtu" ? `rtu:${e.path}` : `${e.kind}://${e.host}:${e.port}`;
}

/** Bits per character on the wire: start + 8 data + parity + stop bits. */
export function bitsPerChar(e: Endpoint): number {
  return e.kind === "rtu" ? 1 + 8 + (e.parity === "none" ? 0 : 1) + e.stopBits : 10;
}

/** True when two endpoints of one bus differ in line settings (baud, parity, stop bits). */
export function sameFraming(a: Endpoint, b: Endpoint): boolean {
  if (a.kind !== "rtu" || b.kind !== "rtu") return a.kind === b.kind;
  return a.baud === b.baud && a.parity === b.parity && a.stopBits === b.stopBits;
}

/** What the serial port is opened with (serialport's options, through modbus-serial). */
export interface SerialOpenOptions {
  baudRate: number;
  dataBits: 8;
  parity: Parity;
  stopBits: 1 | 2;
}

export function serialOpenOptions(e: RtuEndpoint): SerialOpenOptions {
  return { baudRate: e.baud, dataBits: 8, parity: e.parity, stopBits: e.stopBits };
}

/** The wire timing of a serial line, from its framing: the bus's silences and the planner's gap follow it. */
export interface LineTiming {
  bitsPerChar: number;
  /** One character on the wire. */
  charMs: number;
  /** Inter-frame silence: 3.5 characters; a fixed 1.75 ms above 19200 baud (Modbus over serial line, 2.5.1.1). */
  silenceMs: number;
  /** Unneeded registers worth reading through to save one request. */
  gapRegs: number;
}

export function lineTiming(e: RtuEndpoint): LineTiming {
  const bits = bitsPerChar(e);
  const charMs = (bits * 1000) / e.baud;
  return { bitsPerChar: bits, charMs, silenceMs: e.baud > 19200 ? 1.75 : 3.5 * charMs, gapRegs: rtuGapRegs(e.baud, bits) };
}

export function parseEndpoint(text: string): Endpoint {
  const bad = (why: string) => new SitegateError("INVALID_REQUEST", `bad endpoint "${text}": ${why}`);
  if (text.startsWith("rtu:")) {
    const [path, query = ""] = text.slice(4).split("?");
    if (!path) throw bad("no serial device path");
    const q = new URLSearchParams(query);
    const baud = Number(q.get("baud") ?? 9600);
    if (!Number.isInteger(baud) || baud < 300 || baud > 921600) throw bad("baud must be 300..921600");
    const parity = (q.get("parity") ?? "none") as "none" | "even" | "odd";
    if (!["none", "even", "odd"].includes(parity)) throw bad("parity must be none, even or odd");
    const stopBits = Number(q.get("stop") ?? 1) as 1 | 2;
    if (stopBits !== 1 && stopBits !== 2) throw bad("stop must be 1 or 2");
    return { kind: "rtu", path, baud, parity, stopBits };
  }
  const m = /^(tcp|rtu-tcp):\/\/(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/.exec(text);
  if (!m) throw bad("use tcp://HOST:PORT, rtu-tcp://HOST:PORT or rtu:/dev/ttyX?baud=9600");
  // The pattern matched, so all three groups hold text.
  const [, kind = "", host = "", portText = ""] = m;
  const port = Number(portText);
  if (port < 1 || port > 65535) throw bad("port must be 1..65535");
  return { kind: kind as "tcp" | "rtu-tcp", host: host.replace(/^\[|\]$/g, ""), port };
}
