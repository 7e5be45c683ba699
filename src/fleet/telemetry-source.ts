// The fleet's telemetry as a pipe source: the stored snapshots after its own cursor on the
// sample store, each as the data push's body (spec 2.6) and Idempotency-Key, on one topic.
// A snapshot that fits in one message (what a site's poll gives) is written here, each
// device's `{"device_id":...,"metrics":` kept from one snapshot to the next; a larger one is
// split by the data push's own builder. Either way the bytes and keys are the data push's.
import { MAX_PAYLOAD_BYTES, buildPayloads, hasMetrics } from "../uplink/data-push.js";
import type { StoredSnapshot, TelemetryCursor } from "../telemetry/sample-store.js";
import { nameKey } from "../util/idempotency.js";
import type { PipeMessage, PipeSource } from "./pipe.js";

/** Device prefixes kept at most (a site has tens of devices; ids that went away are dropped with the rest). */
const MAX_PREFIXES = 4096;

export class TelemetrySource implements PipeSource {
  private readonly prefixes = new Map<string, string>();
  private readonly siteTail: string;

  constructor(
    private readonly cursor: TelemetryCursor,
    private readonly siteId: string,
    /** Namespace of the keys (the uplink's instance id). */
    private readonly instance: () => string,
    private readonly topic: string,
  ) {
    this.siteTail = `,"site_id":${JSON.stringify(siteId)},"devices":[`;
  }

  read(afterSeq: number, max: number): PipeMessage[] {
    const out: PipeMessage[] = [];
    let from = afterSeq;
    while (out.length === 0) {
      const snaps = this.cursor.pending(Math.max(1, max), from);
      if (snaps.length === 0) break;
      for (const snap of snaps) this.add(snap, out);
      from = snaps[snaps.length - 1].id;
    }
    return out;
  }

  settled(seq: number): void {
    this.cursor.settleThrough(seq);
  }

  /** A snapshot's messages; none when no device has metrics (its seq settles with a later one). */
  private add(snap: StoredSnapshot, out: PipeMessage[]): void {
    const body = this.wholeBody(snap);
    if (body !== null) {
      if (body !== "") out.push(this.message(snap.id, true, body, nameKey(this.instance(), `data_push:${snap.id}:${snap.ts}:0`)));
      return;
    }
    const parts = buildPayloads(snap, this.siteId, this.instance());
    for (let i = 0; i < parts.length; i++) out.push(this.message(snap.id, i === parts.length - 1, parts[i].body, parts[i].idempotencyKey));
  }

  /**
   * The snapshot's body when it is one payload ("" when no device has metrics); null when
   * the data push would split it (over MAX_PAYLOAD_BYTES with more than one device).
   */
  private wholeBody(snap: StoredSnapshot): string | null {
    let body = `{"timestamp":"${new Date(snap.ts).toISOString()}"${this.siteTail}`;
    let devices = 0;
    for (const d of snap.devices) {
      if (!hasMetrics(d.metrics)) continue;
      body += `${devices++ === 0 ? "" : ","}${this.prefix(d.device_id)}${JSON.stringify(d.metrics)}}`;
    }
    if (devices === 0) return "";
    // buildPayloads counts each device's text and a separator: one payload while that sum, one over the body's length, is within the bound.
    return devices === 1 || body.length + 2 < MAX_PAYLOAD_BYTES ? `${body}]}` : null;
  }

  private prefix(deviceId: string): string {
    let p = this.prefixes.get(deviceId);
    if (p === undefined) {
      if (this.prefixes.size >= MAX_PREFIXES) this.prefixes.clear();
      this.prefixes.set(deviceId, (p = `{"device_id":${JSON.stringify(deviceId)},"metrics":`));
    }
    return p;
  }

  private message(seq: number, last: boolean, payload: string, key: string): PipeMessage {
    return { seq, last, topic: this.topic, payload, key, kind: "telemetry" };
  }
}
