// Idempotency-Key values: UUIDs that are the same every time one message is sent, also
// after a restart. A message of the delivery log stores a random one (or its caller's); data-push payloads derive a
// name-based (version 5 style) UUID from the store's instance id and snapshot id.
import { hash, randomUUID } from "node:crypto";

export function newKey(): string {
  return randomUUID();
}

export function nameKey(namespace: string, name: string): string {
  // One-shot hash of namespace, NUL, name (the bytes three update() calls would give): no
  // Hash object per key, and the version and variant set on the hex digits. The fleet and
  // the data push derive one key per telemetry message.
  const x = hash("sha1", `${namespace}\0${name}`, "hex");
  const variant = VARIANT_DIGIT[parseInt(x.charAt(16), 16) & 0x3];
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-5${x.slice(13, 16)}-${variant}${x.slice(17, 20)}-${x.slice(20, 32)}`;
}

/** RFC 4122 variant: the top two bits of digit 16 are 10. */
const VARIANT_DIGIT = ["8", "9", "a", "b"];
