// Data-push payloads (spec 2.6) from stored snapshots: one snapshot's devices in one
// payload with its own timestamp (the read time, never the send time); a snapshot too
// large for one request is split by device into several payloads with the same timestamp.
// A device with nothing to report (no metrics) is left out, never sent as `{}`; a snapshot
// with no device left gives no payload (the push lane settles it at once). The HTTPS data
// push and the fleet's MQTT telemetry both build their bodies here.
import type { StoredSnapshot } from "../telemetry/sample-store.js";
import { nameKey } from "../util/idempotency.js";

export const MAX_PAYLOAD_BYTES = 128 * 1024;

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

export function buildPayloads(snap: StoredSnapshot, siteId: string, instance: string, maxBytes = MAX_PAYLOAD_BYTES): DataPushPayload[] {
  const timestamp = new Date(snap.ts).toISOString();
  const head = `{"timestamp":${JSON.stringify(timestamp)},"site_id":${JSON.stringify(siteId)},"devices":[`;
  const groups: string[][] = [];
  let cur: string[] = [];
  let size = head.length + 2;
  for (const d of snap.devices) {
    if (!hasMetrics(d.metrics)) continue;
    const text = JSON.stringify({ device_id: d.device_id, metrics: d.metrics });
    if (cur.length && size + text.length + 1 > maxBytes) {
      groups.push(cur);
      cur = [];
      size = head.length + 2;
    }
    cur.push(text);
    size += text.length + 1;
  }
  if (cur.length) groups.push(cur);
  return groups.map((g, part) => ({
    snapshotId: snap.id,
    ts: snap.ts,
    part,
    parts: groups.length,
    body: `${head}${g.join(",")}]}`,
    idempotencyKey: nameKey(instance, `data_push:${snap.id}:${snap.ts}:${part}`),
  }));
}
