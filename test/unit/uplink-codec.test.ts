import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { packSamples, unpackSamples } from "../../src/telemetry/sample-codec.js";
import { DataPushWriter, buildPayloads } from "../../src/uplink/data-push.js";
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

/** Odd snapshots: quotes, newlines and non-ASCII in ids, NaN and 1e21 values, devices without metrics, empty snapshots. */
function oddSnapshots(): StoredSnapshot[] {
  const ts = Date.UTC(2026, 10, 22, 12, 0, 0, 250);
  return Array.from({ length: 60 }, (_, n) => {
    const i = n + 1;
    const devices = Array.from({ length: i % 13 }, (_, j) => ({
      device_id: j === 2 ? `pv "w"\n${i}-ü` : `dev-${j}`,
      metrics:
        j % 4 === 3
          ? ({} as Record<string, number>)
          : { power_w: i * j - 7.25, soc_pct: j / 3, big: 1e21 * j, nan: j === 1 ? Number.NaN : 0 },
    }));
    return { id: i * 7, ts: ts + i * 1000, devices };
  });
}

test("data-push bytes and keys are pinned: the same for HTTPS (buildPayloads) and MQTT (the writer a lane keeps), split or whole", () => {
  const site = 'site-"ü"-001';
  const digest = (lines: string[]) => createHash("sha256").update(lines.join("")).digest("hex");
  const lines: string[] = [];
  for (const max of [120, 160, 200, 400, 128 * 1024])
    for (const s of oddSnapshots())
      for (const p of buildPayloads(s, site, "ns-1", max)) lines.push(`${max}|${p.part}/${p.parts}|${p.body}|${p.idempotencyKey}\n`);
  // Written by the code before the HTTPS and MQTT writers became one: the wire did not change.
  assert.equal(digest(lines), "9a0dfcbe1a667bd72a7ebe9f96379c64d4a3e87e70abc658bc11e3c46b46db8e");
  const writer = new DataPushWriter(site, () => "ns-1");
  const mqtt = oddSnapshots().flatMap((s) => writer.encode(s).map((p, i) => `${128 * 1024}|${i}|${p.body}|${p.key}\n`));
  assert.equal(digest(mqtt), "2b1764dad065fa6496c5eabe78b16a84f82906ef99ebc03add8d690193ff364c");
  const [first] = buildPayloads(oddSnapshots()[3]!, site, "ns-1", 220);
  assert.equal(
    first!.body,
    '{"timestamp":"2026-11-22T12:00:04.250Z","site_id":"site-\\"ü\\"-001","devices":[{"device_id":"dev-0","metrics":{"power_w":-7.25,"soc_pct":0,"big":0,"nan":0}}]}',
  );
  assert.equal(first!.idempotencyKey, "bd94738d-2cf8-5199-a2dc-830ba9acc224");
});

test("the data-push body and its key template are written once in src (uplink/data-push.ts)", () => {
  const src = resolve(fileURLToPath(import.meta.url), "../../../../src");
  const files = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
      e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : [],
    );
  const writers = files(src)
    .filter((f) => /data_push:\$\{|"metrics":|"devices":\[/.test(readFileSync(f, "utf8")))
    .map((f) => relative(src, f));
  assert.deepEqual(writers, ["uplink/data-push.ts"]);
});
