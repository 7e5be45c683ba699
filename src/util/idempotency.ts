// Idempotency-Key values: UUIDs that are the same every time one message is sent, also
// after a restart. Outbox messages store a random one; data-push payloads derive a
// name-based (version 5 style) UUID from the store's instance id and snapshot id.
import { createHash, randomUUID } from "node:crypto";

export function newKey(): string {
  return randomUUID();
}

export function nameKey(namespace: string, name: string): string {
  const h = createHash("sha1").update(namespace).update("\0").update(name).digest();
  h[6] = (h[6] & 0x0f) | 0x50; // version 5
  h[8] = (h[8] & 0x3f) | 0x80; // RFC 4122 variant
  const x = h.subarray(0, 16).toString("hex");
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20, 32)}`;
}
