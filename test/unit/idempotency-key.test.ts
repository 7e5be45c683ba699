import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { nameKey } from "../../src/util/idempotency.js";

/** The keys as first derived (Hash object, three updates, version and variant set on the bytes). */
function reference(namespace: string, name: string): string {
  const h = createHash("sha1").update(namespace).update("\0").update(name).digest();
  h[6] = (h[6] & 0x0f) | 0x50;
  h[8] = (h[8] & 0x3f) | 0x80;
  const x = h.subarray(0, 16).toString("hex");
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20, 32)}`;
}

test("name-based keys are the same as ever: known values, non-ASCII names", () => {
  assert.equal(nameKey("0f1e2d3c-aaaa-bbbb-cccc-000000000001", "data_push:42:1795867200000:0"), "4c6ce718-e888-53c9-b30d-3fe9d0bf9bf2");
  assert.equal(nameKey("sitegate-schedule", "nuit été@2026-11-22T12:00:00.000Z"), "ce34ec77-df0b-56e7-8c25-1d444a720266");
});

test("name-based keys match the byte-wise derivation for every variant digit", () => {
  const digits = new Set<string>();
  for (let i = 0; i < 400; i++) {
    const key = nameKey("ns-1", `data_push:${i}:${1795867200000 + i * 1000}:${i % 3}`);
    assert.equal(key, reference("ns-1", `data_push:${i}:${1795867200000 + i * 1000}:${i % 3}`));
    assert.match(key, /^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    digits.add(key[19]);
  }
  assert.equal(digits.size, 4);
});
