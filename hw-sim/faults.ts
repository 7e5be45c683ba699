// Fault injection per device, and the one place that decides how a device answers a
// request: normally, not at all, with an exception, late, with a broken frame, or by
// dropping the connection. Servers (TCP, RTU) only carry out the decision, and tell the
// endpoint when a client connects (`late_first`).
//   refuse_writes  writes (fn 5, 6, 15, 16) answered with exception `code` (default 4), nothing applied
//   offline        the device answers nothing at all (reads and writes) until cleared; its
//                  physics go on (a battery keeps to its revert timer)
//   late_first     the first answer of each device after a client connects (or after the
//                  fault is set) comes `delay_ms` (default 2000) late; later ones on time
//   no_answer_at   reads (fn 3, 4) that touch registers `address`..`address + count - 1` (of
//                  `table`, or of both) go unanswered; the device answers every other request.
//                  A block of registers a firmware leaves silent
// Not a fault but the device's own trait: a model with a wait after connecting
// (`connectDelayMs`, a brand model's `connect_delay_ms`) answers nothing to the requests
// that arrive on a connection within that long of its accept, as a device still waking its
// Modbus server for it; later requests, and those of connections open longer, are answered.
import { z } from "zod";
import { exceptionPdu, handlePdu, type WriteRecord } from "./modbus-pdu.js";
import type { SimDevice } from "./models/device.js";

export const faultSchema = z
  .strictObject({
    device: z.string().min(1),
    fault: z.enum([
      "no_answer",
      "exception",
      "delay",
      "drop",
      "crc",
      "ignore_writes",
      "refuse_writes",
      "offline",
      "late_first",
      "no_answer_at",
    ]),
    code: z.number().int().min(1).max(255).optional(),
    delay_ms: z.number().int().min(0).max(60_000).optional(),
    /** no_answer_at: the first register, the number of registers (default 1), the table (default both). */
    address: z.number().int().min(0).max(0xffff).optional(),
    count: z.number().int().min(1).max(0x10000).optional(),
    table: z.enum(["holding", "input"]).optional(),
  })
  .refine((f) => f.fault !== "no_answer_at" || f.address !== undefined, { message: "no_answer_at needs address", path: ["address"] });
export type FaultSpec = z.infer<typeof faultSchema>;
export type FaultKind = FaultSpec["fault"];

export type Decision = { kind: "reply"; pdu: Buffer; delayMs: number; corrupt: boolean } | { kind: "silent" } | { kind: "drop" };

export interface LoggedWrite extends WriteRecord {
  at: string;
  ignored?: boolean;
  /** Answered with this exception (`refuse_writes`); nothing applied. */
  refused?: number;
}

const WRITE_LOG_MAX = 200;
const WRITE_FNS = new Set([5, 6, 15, 16]);

export class DeviceSlot {
  readonly faults = new Map<FaultKind, FaultSpec>();
  readonly writes: LoggedWrite[] = [];
  requests = 0;
  /** The next answer is the first since a connect (`late_first`). */
  private fresh = true;
  constructor(
    readonly device: SimDevice,
    private readonly now: () => number = Date.now,
  ) {}

  /** Answers the device gives now: not while `no_answer`, `drop` or `offline` holds. */
  get online(): boolean {
    return !this.faults.has("no_answer") && !this.faults.has("drop") && !this.faults.has("offline");
  }

  setFault(spec: FaultSpec): void {
    this.faults.set(spec.fault, spec);
    if (spec.fault === "late_first") this.fresh = true;
  }

  /** A client connected: the next answer is a first one again. */
  connected(): void {
    this.fresh = true;
  }

  /** A request on a connection accepted at `connectedAt` (ms of `now`; absent: an RTU line) within the device's wait. */
  private waking(connectedAt: number | undefined): boolean {
    const wait = this.device.connectDelayMs ?? 0;
    return wait > 0 && connectedAt !== undefined && this.now() - connectedAt < wait;
  }

  /** `connectedAt`: when the request's connection was accepted (ms of `now`); absent on an RTU line. */
  decide(pdu: Buffer, connectedAt?: number): Decision {
    this.requests++;
    if (this.faults.has("offline") || this.faults.has("no_answer")) return { kind: "silent" };
    if (silencedRead(this.faults.get("no_answer_at"), pdu)) return { kind: "silent" };
    if (this.faults.has("drop")) return { kind: "drop" };
    if (this.waking(connectedAt)) return { kind: "silent" };
    const late = this.faults.get("late_first");
    const first = this.fresh;
    this.fresh = false;
    const steady = this.faults.has("delay") ? (this.faults.get("delay")?.delay_ms ?? 2000) : 0;
    const delayMs = steady + (late && first ? (late.delay_ms ?? 2000) : 0);
    const corrupt = this.faults.has("crc");
    const exc = this.faults.get("exception");
    const fn = pdu[0] ?? 0; // an empty PDU: function 0, which no device has
    if (exc) return { kind: "reply", pdu: exceptionPdu(fn, exc.code ?? 4), delayMs, corrupt };
    const refuse = this.faults.get("refuse_writes");
    if (refuse && WRITE_FNS.has(fn)) {
      const code = refuse.code ?? 4;
      const reply = handlePdu(this.device, pdu, (w) => this.logWrite(w, { refused: code }), false);
      // A malformed write is still answered as such (exception 3 of its own).
      return { kind: "reply", pdu: reply[0]! & 0x80 ? reply : exceptionPdu(fn, code), delayMs, corrupt };
    }
    const ignore = this.faults.has("ignore_writes") && WRITE_FNS.has(fn);
    const reply = handlePdu(this.device, pdu, (w) => this.logWrite(w, ignore ? { ignored: true } : {}), !ignore);
    return { kind: "reply", pdu: reply, delayMs, corrupt };
  }

  private logWrite(w: WriteRecord, how: { ignored?: boolean; refused?: number }): void {
    this.writes.push({ at: new Date().toISOString(), ...w, ...how });
    if (this.writes.length > WRITE_LOG_MAX) this.writes.splice(0, this.writes.length - WRITE_LOG_MAX);
  }
}

/** Whether a read (fn 3 holding, 4 input) touches the registers a `no_answer_at` fault silences. */
function silencedRead(f: FaultSpec | undefined, pdu: Buffer): boolean {
  if (!f || f.address === undefined || pdu.length < 5) return false;
  const table = pdu[0] === 3 ? "holding" : pdu[0] === 4 ? "input" : undefined;
  if (!table || (f.table !== undefined && f.table !== table)) return false;
  const address = pdu.readUInt16BE(1);
  const count = pdu.readUInt16BE(3);
  return address < f.address + (f.count ?? 1) && f.address < address + count;
}

/** The devices behind one port, by unit id. */
export class Endpoint {
  readonly slots = new Map<number, DeviceSlot>();

  add(slot: DeviceSlot): void {
    this.slots.set(slot.device.unit, slot);
  }

  /** A client connected to the port (a TCP connection): every device's next answer is a first one. */
  connected(): void {
    for (const s of this.slots.values()) s.connected();
  }

  /** `absentUnit` is what a unit id with no device gets: silence on RTU, exception 0x0B from a TCP gateway. */
  decide(unit: number, pdu: Buffer, absentUnit: "silent" | "gateway_exception", connectedAt?: number): Decision {
    const slot = this.slots.get(unit);
    if (!slot) {
      return absentUnit === "silent"
        ? { kind: "silent" }
        : { kind: "reply", pdu: exceptionPdu(pdu[0] ?? 0, 0x0b), delayMs: 0, corrupt: false };
    }
    return slot.decide(pdu, connectedAt);
  }
}
