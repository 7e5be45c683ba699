// A field capture (`sitegate dump`) served back as a device, frozen: a read answers the
// words the device answered, the exception it answered, or silence where it was silent; a
// register the capture never read answers exception 2 (illegal data address), as a device
// without it would. Writes are acknowledged and logged, never applied: the frozen device
// cannot move, so a test sees that the write went out, not that the battery followed.
import { readFileSync } from "node:fs";
import { z } from "zod";
import { Endpoint, type Decision } from "./faults.js";
import { ILLEGAL_ADDRESS, ILLEGAL_VALUE, exceptionPdu, type WriteRecord } from "./modbus-pdu.js";
import { TcpServer } from "./tcp-server.js";

const table = z.enum(["holding", "input", "coil", "discrete"]);
const captureSchema = z.object({
  format: z.literal("sitegate-capture/1"),
  profile: z.string(),
  unit: z.number().int().min(0).max(255),
  ranges: z.array(
    z.object({
      unit: z.number().int().min(0).max(255),
      table,
      address: z.number().int().min(0).max(0xffff),
      count: z.number().int().min(1).max(2000),
      words: z.array(z.number().int().min(0).max(0xffff)).optional(),
      exception: z.number().int().min(1).max(255).optional(),
      timeout: z.literal(true).optional(),
    }),
  ),
});
export type ReplayCapture = z.infer<typeof captureSchema>;
type Failed = { unit: number; table: string; address: number; count: number; exception?: number; timeout?: true };

export const FN_TABLE: Record<number, z.infer<typeof table>> = { 1: "coil", 2: "discrete", 3: "holding", 4: "input" };

/** Reads and checks a capture file; a clear message when it is not one. */
export function loadCapture(file: string): ReplayCapture {
  const parsed = captureSchema.safeParse(JSON.parse(readFileSync(file, "utf8")));
  if (!parsed.success)
    throw new Error(`${file} is not a sitegate capture: ${parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`);
  return parsed.data;
}

/** The capture's units behind one port, answering as they did. */
export class ReplayEndpoint extends Endpoint {
  private readonly words = new Map<string, Map<number, number>>();
  private readonly failed: Failed[] = [];
  private readonly units = new Set<number>();
  readonly replayWrites: (WriteRecord & { unit: number })[] = [];

  constructor(capture: ReplayCapture) {
    super();
    for (const r of capture.ranges) {
      this.units.add(r.unit);
      if (!r.words) {
        this.failed.push(r);
        continue;
      }
      const k = `${r.unit}/${r.table}`;
      let m = this.words.get(k);
      if (!m) this.words.set(k, (m = new Map()));
      r.words.forEach((w, i) => m.set(r.address + i, w));
    }
  }

  override connected(): void {}

  override decide(unit: number, pdu: Buffer): Decision {
    const fn = pdu[0] ?? 0;
    if (!this.units.has(unit)) return reply(exceptionPdu(fn, 0x0b));
    if (pdu.length < 5) return reply(exceptionPdu(fn, ILLEGAL_VALUE));
    const address = pdu.readUInt16BE(1);
    const t = FN_TABLE[fn];
    if (!t) {
      if (fn === 5 || fn === 6 || fn === 15 || fn === 16) return this.write(unit, fn, pdu);
      return reply(exceptionPdu(fn, 1));
    }
    const count = pdu.readUInt16BE(3);
    const got = this.captured(unit, t, address, count);
    if (got) return reply(answer(fn, got));
    const f = this.failure(unit, t, address, count);
    if (f?.timeout) return { kind: "silent" };
    return reply(exceptionPdu(fn, f?.exception ?? ILLEGAL_ADDRESS));
  }

  /** The captured words of a range, when the capture holds every one of them. */
  captured(unit: number, t: z.infer<typeof table>, address: number, count: number): number[] | undefined {
    const m = this.words.get(`${unit}/${t}`);
    const got: number[] = [];
    for (let a = address; a < address + count && m?.has(a); a++) got.push(m.get(a)!);
    return got.length === count ? got : undefined;
  }

  /** A captured read that overlaps the range and failed (its exception, or its silence). */
  failure(unit: number, t: z.infer<typeof table>, address: number, count: number): Failed | undefined {
    return this.failed.find((r) => r.unit === unit && r.table === t && r.address < address + count && address < r.address + r.count);
  }

  private write(unit: number, fn: number, pdu: Buffer): Decision {
    const address = pdu.readUInt16BE(1);
    const values =
      fn === 16 && pdu.length >= 6
        ? Array.from({ length: pdu.readUInt8(5) >> 1 }, (_, i) => pdu.readUInt16BE(6 + i * 2))
        : [pdu.readUInt16BE(3)];
    this.replayWrites.push({ unit, fn, address, values });
    if (this.replayWrites.length > 1000) this.replayWrites.shift();
    return reply(Buffer.from(pdu.subarray(0, 5)));
  }
}

export function reply(pdu: Buffer): Decision {
  return { kind: "reply", pdu, delayMs: 0, corrupt: false };
}

function answer(fn: number, words: number[]): Buffer {
  if (fn === 1 || fn === 2) {
    const out = Buffer.alloc(2 + Math.ceil(words.length / 8));
    out[0] = fn;
    out[1] = out.length - 2;
    words.forEach((b, i) => {
      if (b) out[2 + (i >> 3)] = out.readUInt8(2 + (i >> 3)) | (1 << (i & 7));
    });
    return out;
  }
  const out = Buffer.alloc(2 + words.length * 2);
  out[0] = fn;
  out[1] = words.length * 2;
  words.forEach((w, i) => out.writeUInt16BE(w & 0xffff, 2 + i * 2));
  return out;
}

/** Serves a capture on a Modbus TCP port (0: a free one). */
export async function startReplay(
  capture: ReplayCapture,
  host = "127.0.0.1",
  port = 0,
): Promise<{ port: number; endpoint: ReplayEndpoint; stop: () => Promise<void> }> {
  const endpoint = new ReplayEndpoint(capture);
  const server = new TcpServer(endpoint, host, port);
  await server.start();
  return { port: server.port, endpoint, stop: () => server.stop() };
}
