// The data-push payload (spec 2.6), written here once for both uplinks: the HTTPS data push
// and the fleet's MQTT telemetry send these bodies and Idempotency-Keys, byte for byte.
// One snapshot's devices in one payload with its own timestamp (the read time, never the
// send time); a snapshot too large for one request is split by device into several
// payloads with the same timestamp. A device with nothing to report (no metrics) is left
// out, never sent as `{}`; a snapshot with no device left gives no payload (its lane
// settles it at once).
import type { StoredSnapshot } from "../telemetry/sample-store.js";
import type { SnapshotPayload } from "../delivery/snapshot-source.js";
import { nameKey } from "../util/idempotency.js";

export const MAX_PAYLOAD_BYTES = 128 * 1024;
/** Device prefixes kept at most (a site has tens of devices; ids that went away are dropped with the rest). */
const MAX_PREFIXES = 4096;

export interface DataPushPayload {
  snapshotId: number;
  /** The snapshot's tick time (UTC ms). */
  ts: number;
  part: number;
  parts: number;
  body: string;
  idempotencyKey: string;
}

/** A device has something to report when it has at least one metric. */
export function hasMetrics(metrics: Record<string, number>): boolean {
  return Object.keys(metrics).length > 0;
}

/** The Idempotency-Key of one part of a snapshot's data push (the same on HTTPS and MQTT). */
export function dataPushKey(instance: string, snap: Pick<StoredSnapshot, "id" | "ts">, part: number): string {
  return nameKey(instance, `data_push:${snap.id}:${snap.ts}:${part}`);
}

/**
 * The one writer of data-push payloads for a site. Each device's `{"device_id":...,"metrics":`
 * is kept from one snapshot to the next (a lane writes one body per poll).
 */
export class DataPushWriter {
  private readonly prefixes = new Map<string, string>();
  private readonly siteTail: string;

  constructor(
    siteId: string,
    /** Namespace of the keys (the database's instance id), read when a payload is written. */
    private readonly instance: () => string,
    private readonly maxBytes = MAX_PAYLOAD_BYTES,
  ) {
    this.siteTail = `,"site_id":${JSON.stringify(siteId)},"devices":[`;
  }

  /** The snapshot's bodies: one per part, each within maxBytes unless a single device is larger. */
  bodies(snap: StoredSnapshot): string[] {
    const head = `{"timestamp":${JSON.stringify(new Date(snap.ts).toISOString())}${this.siteTail}`;
    const out: string[] = [];
    let body = head;
    let devices = 0;
    for (const d of snap.devices) {
      if (!hasMetrics(d.metrics)) continue;
      const text = `${this.prefix(d.device_id)}${JSON.stringify(d.metrics)}}`;
      // The body so far, this device, its separator and the closing `]}` (counted as before: 4 over the text).
      if (devices > 0 && body.length + text.length + 4 > this.maxBytes) {
        out.push(`${body}]}`);
        body = head;
        devices = 0;
      }
      body += devices++ === 0 ? text : `,${text}`;
    }
    if (devices > 0) out.push(`${body}]}`);
    return out;
  }

  /** The snapshot's payloads for a lane of the delivery core (delivery/snapshot-source.ts). */
  encode(snap: StoredSnapshot): SnapshotPayload[] {
    const instance = this.instance();
    return this.bodies(snap).map((body, part) => ({ body, key: dataPushKey(instance, snap, part) }));
  }

  /** The snapshot's payloads with their place in it. */
  payloads(snap: StoredSnapshot): DataPushPayload[] {
    return this.encode(snap).map((p, part, all) => ({
      snapshotId: snap.id,
      ts: snap.ts,
      part,
      parts: all.length,
      body: p.body,
      idempotencyKey: p.key,
    }));
  }

  private prefix(deviceId: string): string {
    let p = this.prefixes.get(deviceId);
    if (p === undefined) {
      if (this.prefixes.size >= MAX_PREFIXES) this.prefixes.clear();
      this.prefixes.set(deviceId, (p = `{"device_id":${JSON.stringify(deviceId)},"metrics":`));
    }
    return p;
  }
}

/** One snapshot's payloads (a writer of its own: tests and benchmarks). */
export function buildPayloads(snap: StoredSnapshot, siteId: string, instance: string, maxBytes = MAX_PAYLOAD_BYTES): DataPushPayload[] {
  return new DataPushWriter(siteId, () => instance, maxBytes).payloads(snap);
}
