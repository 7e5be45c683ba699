import { test } from "node:test";
import assert from "node:assert/strict";
import { packSamples, unpackSamples } from "../../src/telemetry/sample-codec.js";
import { buildPayloads } from "../../src/uplink/data-push.js";
import { nameKey } from "../../src/util/idempotency.js";
import type { StoredSnapshot } from "../../src/telemetry/sample-store.js";

test("samples round-trip exactly, whatever the value", () => {
  const values = [
    0,
    1,
    -1,
    2000,
    -4975,
    65535,
    4294967295,
    2 ** 50,
    229.7,
    49.99,
    0.1,
    -0.5,
    12.345678,
    Math.PI,
    1e-9,
    1.5e300,
    -0,
    Number.MAX_SAFE_INTEGER,
    3.4028234663852886e38,
  ];
  const samples = values.map((value, i) => ({ series: i * 37, value }));
  const back = unpackSamples(packSamples(samples));
  assert.equal(back.length, samples.length);
  back.forEach((s, i) => {
    assert.equal(s.series, samples[i].series);
    assert.ok(Object.is(s.value, samples[i].value), `${samples[i].value} came back as ${s.value}`);
  });
  assert.ok(Number.isNaN(unpackSamples(packSamples([{ series: 1, value: NaN }]))[0].value));
});

test("typical samples take a few bytes each", () => {
  const samples = [2000, -4975, 229.7, 49.99, 50.5, 1234567, 87.3, 3].map((value, i) => ({ series: i + 1, value }));
  const size = packSamples(samples).length;
  assert.ok(size <= samples.length * 5, `${size} bytes for ${samples.length} samples`);
});

test("a truncated record is an error, not a wrong value", () => {
  const buf = packSamples([{ series: 1, value: 123456789 }]);
  assert.throws(() => unpackSamples(buf.subarray(0, buf.length - 1)), /truncated/);
});

test("a payload carries the snapshot's read time and every device; big snapshots split by device", () => {
  const snap: StoredSnapshot = {
    id: 42,
    ts: Date.UTC(2026, 10, 22, 10, 0, 0, 250),
    devices: [
      { device_id: "battery", metrics: { power_w: -2000, soc_pct: 55.5 } },
      { device_id: "grid", metrics: { power_w: 3100 } },
    ],
  };
  const [p] = buildPayloads(snap, "site-001", "inst");
  assert.deepEqual(JSON.parse(p.body), {
    timestamp: "2026-11-22T10:00:00.250Z",
    site_id: "site-001",
    devices: [
      { device_id: "battery", metrics: { power_w: -2000, soc_pct: 55.5 } },
      { device_id: "grid", metrics: { power_w: 3100 } },
    ],
  });
  assert.equal(p.idempotencyKey, buildPayloads(snap, "site-001", "inst")[0].idempotencyKey, "same key every time");
  assert.notEqual(p.idempotencyKey, buildPayloads(snap, "site-001", "other-db")[0].idempotencyKey);
  assert.match(p.idempotencyKey, /^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);

  const many: StoredSnapshot = {
    ...snap,
    devices: Array.from({ length: 30 }, (_, i) => ({ device_id: `dev-${i}`, metrics: { power_w: i } })),
  };
  const parts = buildPayloads(many, "site-001", "inst", 400);
  assert.ok(parts.length > 1);
  const all = parts.flatMap((x) => (JSON.parse(x.body) as { devices: Array<{ device_id: string }> }).devices.map((d) => d.device_id));
  assert.deepEqual(
    all,
    many.devices.map((d) => d.device_id),
  );
  for (const x of parts) {
    assert.ok(x.body.length <= 400);
    assert.equal(JSON.parse(x.body).timestamp, "2026-11-22T10:00:00.250Z");
  }
  assert.equal(new Set(parts.map((x) => x.idempotencyKey)).size, parts.length);
});

test("a device with nothing to report is left out of the payload, not sent as {}", () => {
  const snap: StoredSnapshot = {
    id: 43,
    ts: Date.UTC(2026, 10, 22, 10, 0, 1),
    devices: [
      { device_id: "sdm", metrics: { power_w: -1959.854 } },
      { device_id: "meter-booting", metrics: {} },
      { device_id: "relay", metrics: { state: 12 } },
    ],
  };
  const parts = buildPayloads(snap, "site-001", "inst");
  assert.equal(parts.length, 1);
  assert.ok(!parts[0].body.includes("{}"), parts[0].body);
  assert.deepEqual(JSON.parse(parts[0].body).devices, [
    { device_id: "sdm", metrics: { power_w: -1959.854 } },
    { device_id: "relay", metrics: { state: 12 } },
  ]);
  // Nothing at all to report: no payload (the lane settles the snapshot without a request).
  assert.deepEqual(buildPayloads({ ...snap, devices: [{ device_id: "meter-booting", metrics: {} }] }, "site-001", "inst"), []);
  // Empty devices take no room when a snapshot is split.
  const many: StoredSnapshot = {
    ...snap,
    devices: Array.from({ length: 30 }, (_, i) => ({
      device_id: `dev-${i}`,
      metrics: (i % 2 ? {} : { power_w: i }) as Record<string, number>,
    })),
  };
  const split = buildPayloads(many, "site-001", "inst", 400);
  const sent = split.flatMap((x) => (JSON.parse(x.body) as { devices: Array<{ device_id: string; metrics: object }> }).devices);
  assert.deepEqual(
    sent.map((d) => d.device_id),
    many.devices.filter((_, i) => i % 2 === 0).map((d) => d.device_id),
  );
});

test("name-based keys are stable and distinct", () => {
  assert.equal(nameKey("a", "b"), nameKey("a", "b"));
  assert.notEqual(nameKey("a", "b"), nameKey("a", "c"));
});
