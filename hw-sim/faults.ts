// Fault injection per device, and the one place that decides how a device answers a
// request: normally, not at all, with an exception, late, with a broken frame, or by
// dropping the connection. Servers (TCP, RTU) only carry out the decision.
import { z } from "zod";
import { exceptionPdu, handlePdu, type WriteRecord } from "./modbus-pdu.js";
import type { SimDevice } from "./models/device.js";

export const faultSchema = z.strictObject({
  device: z.string().min(1),
  fault: z.enum(["no_answer", "exception", "delay", "drop", "crc", "ignore_writes"]),
  code: z.number().int().min(1).max(255).optional(),
  delay_ms: z.number().int().min(0).max(60_000).optional(),
});
export type FaultSpec = z.infer<typeof faultSchema>;
export type FaultKind = FaultSpec["fault"];

export type Decision = { kind: "reply"; pdu: Buffer; delayMs: number; corrupt: boolean } | { kind: "silent" } | { kind: "drop" };

export interface LoggedWrite extends WriteRecord {
  at: string;
  ignored?: boolean;
}

const WRITE_LOG_MAX = 200;
const WRITE_FNS = new Set([5, 6, 15, 16]);

export class DeviceSlot {
  readonly faults = new Map<FaultKind, FaultSpec>();
  readonly writes: LoggedWrite[] = [];
  requests = 0;

  constructor(readonly device: SimDevice) {}

  decide(pdu: Buffer): Decision {
    this.requests++;
    if (this.faults.has("no_answer")) return { kind: "silent" };
    if (this.faults.has("drop")) return { kind: "drop" };
    const delayMs = this.faults.get("delay")?.delay_ms ?? (this.faults.has("delay") ? 2000 : 0);
    const corrupt = this.faults.has("crc");
    const exc = this.faults.get("exception");
    const fn = pdu[0] ?? 0; // an empty PDU: function 0, which no device has
    if (exc) return { kind: "reply", pdu: exceptionPdu(fn, exc.code ?? 4), delayMs, corrupt };
    const ignore = this.faults.has("ignore_writes") && WRITE_FNS.has(fn);
    const reply = handlePdu(this.device, pdu, (w) => this.logWrite(w, ignore), !ignore);
    return { kind: "reply", pdu: reply, delayMs, corrupt };
  }

  private logWrite(w: WriteRecord, ignored: boolean): void {
    this.writes.push({ at: new Date().toISOString(), ...w, ...(ignored ? { ignored: true } : {}) });
    if (this.writes.length > WRITE_LOG_MAX) this.writes.splice(0, this.writes.length - WRITE_LOG_MAX);
  }
}

/** The devices behind one port, by unit id. */
export class Endpoint {
  readonly slots = new Map<number, DeviceSlot>();

  add(slot: DeviceSlot): void {
    this.slots.set(slot.device.unit, slot);
  }

  /** `absentUnit` is what a unit id with no device gets: silence on RTU, exception 0x0B from a TCP gateway. */
  decide(unit: number, pdu: Buffer, absentUnit: "silent" | "gateway_exception"): Decision {
    const slot = this.slots.get(unit);
    if (!slot) {
      return absentUnit === "silent"
        ? { kind: "silent" }
        : { kind: "reply", pdu: exceptionPdu(pdu[0] ?? 0, 0x0b), delayMs: 0, corrupt: false };
    }
    return slot.decide(pdu);
  }
}
