// The fleet's telemetry bodies: each stored snapshot as the data push's body (spec 2.6)
// and Idempotency-Key, the encoder of the fleet's snapshot lane (delivery/snapshot-source.ts).
// A snapshot that fits in one message (what a site's poll gives) is written here, each
// device's `{"device_id":...,"metrics":` kept from one snapshot to the next; a larger one is
// split by the data push's own builder. Either way the bytes and keys are the data push's.
import { MAX_PAYLOAD_BYTES, buildPayloads, hasMetrics } from "../uplink/data-push.js";
import type { StoredSnapshot } from "../telemetry/sample-store.js";
import type { SnapshotPayload } from "../delivery/snapshot-source.js";
import { nameKey } from "../util/idempotency.js";

/** Device prefixes kept at most (a site has tens of devices; ids that went away are dropped with the rest). */
const MAX_PREFIXES = 4096;

export class TelemetryBodies {
  private readonly prefixes = new Map<string, string>();
  private readonly siteTail: string;

  constructor(
    private readonly siteId: string,
    /** Namespace of the keys (the uplink's instance id). */
    private readonly instance: () => string,
  ) {
    this.siteTail = `,"site_id":${JSON.stringify(siteId)},"devices":[`;
  }

  /** A snapshot's messages; none when no device has metrics (it settles with a later one). */
  encode(snap: StoredSnapshot): SnapshotPayload[] {
    const body = this.wholeBody(snap);
    if (body !== null) return body === "" ? [] : [{ body, key: nameKey(this.instance(), `data_push:${snap.id}:${snap.ts}:0`) }];
    return buildPayloads(snap, this.siteId, this.instance()).map((p) => ({ body: p.body, key: p.idempotencyKey }));
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
}
