import { test } from "node:test";
import assert from "node:assert/strict";
import { TelemetrySource } from "../../src/fleet/telemetry-source.js";
import type { PipeMessage } from "../../src/fleet/pipe.js";
import { MAX_PAYLOAD_BYTES, buildPayloads } from "../../src/uplink/data-push.js";
import type { StoredSnapshot, TelemetryCursor } from "../../src/telemetry/sample-store.js";

const SITE = 'site-"ü"-001';
const NS = "0f1e2d3c-aaaa-bbbb-cccc-000000000001";
const TOPIC = "sitegate/site-001/telemetry";

/** A cursor over fixed snapshots (what the sample store's consumer gives). */
function cursor(snaps: StoredSnapshot[]): TelemetryCursor & { settled: number[] } {
  const settled: number[] = [];
  return {
    name: "fleet_telemetry",
    through: 0,
    backlog: snaps.length,
    settled,
    pending: (limit, after = 0) => snaps.filter((s) => s.id > after).slice(0, limit),
    settleThrough: (id) => settled.push(id),
  };
}

/** What the data push's builder gives for the same snapshots, as pipe messages. */
function expected(snaps: StoredSnapshot[]): PipeMessage[] {
  return snaps.flatMap((s) => {
    const parts = buildPayloads(s, SITE, NS);
    return parts.map((p, i) => ({
      seq: s.id,
      last: i === parts.length - 1,
      topic: TOPIC,
      payload: p.body,
      key: p.idempotencyKey,
      kind: "telemetry",
    }));
  });
}

function readAll(source: TelemetrySource, max: number): PipeMessage[] {
  const out: PipeMessage[] = [];
  for (let batch = source.read(0, max); batch.length; batch = source.read(batch[batch.length - 1].seq, max)) out.push(...batch);
  return out;
}

const device = (device_id: string, metrics: Record<string, number>) => ({ device_id, metrics });

test("telemetry messages are the data push's bodies and keys: odd ids and values, devices without metrics, nothing to send", () => {
  const ts = Date.UTC(2026, 10, 22, 12, 0, 0);
  const snaps: StoredSnapshot[] = [
    { id: 3, ts, devices: [device("dev-0", { power_w: 1200, soc_pct: 50.1 }), device("dev-1", { energy_import_wh: 100000 })] },
    { id: 4, ts: ts + 1000, devices: [device('pv "west"\n', { power_w: -0.5, t: 1e21, tiny: 5e-7 }), device("empty", {})] },
    { id: 7, ts: ts + 2000, devices: [device("empty", {})] },
    { id: 8, ts: ts + 3000, devices: [device("nan", { a: Number.NaN, b: Number.POSITIVE_INFINITY }), device("dev-0", { power_w: 0 })] },
    { id: 9, ts: ts + 4000, devices: [] },
    { id: 12, ts: ts + 5000, devices: [device("dev-0", { power_w: 1 }), device("dev-0b", { power_w: 2 })] },
  ];
  const source = new TelemetrySource(cursor(snaps), SITE, () => NS, TOPIC);
  for (const max of [1, 2, 32]) assert.deepEqual(readAll(source, max), expected(snaps), `read ${max} at a time`);
});

test("a snapshot too large for one payload is split as the data push splits it, also right at the bound", () => {
  const ts = Date.UTC(2026, 10, 22, 12, 0, 0);
  const base = Array.from({ length: 400 }, (_, i) => device(`d${i}`, { power_w: i, soc_pct: i / 10 }));
  const bodyLength = (devices: StoredSnapshot["devices"]) =>
    buildPayloads({ id: 1, ts, devices }, SITE, NS, Number.MAX_SAFE_INTEGER)[0].body.length;
  const short = bodyLength([...base, device("z", { power_w: 1 })]);
  const snaps: StoredSnapshot[] = [];
  let id = 1;
  // The last device's id grown so that the whole body is 2 bytes under to 1 byte over the bound.
  for (let over = -2; over <= 1; over++) {
    const last = device(`z${"y".repeat(MAX_PAYLOAD_BYTES + over - short)}`, { power_w: 1 });
    snaps.push({ id: id++, ts, devices: [...base, last] }, { id: id++, ts, devices: [device("a", { power_w: 2 }), last] });
  }
  snaps.push({ id: id++, ts, devices: [device("one", Object.fromEntries(Array.from({ length: 20000 }, (_, i) => [`m${i}`, i])))] });
  const lengths = snaps.map((s) => buildPayloads(s, SITE, NS, Number.MAX_SAFE_INTEGER)[0].body.length);
  for (const at of [MAX_PAYLOAD_BYTES - 1, MAX_PAYLOAD_BYTES, MAX_PAYLOAD_BYTES + 1])
    assert.ok(lengths.includes(at), `a body of ${at} bytes`);
  const want = expected(snaps);
  assert.ok(want.length > snaps.length, "some snapshots are split");
  assert.deepEqual(readAll(new TelemetrySource(cursor(snaps), SITE, () => NS, TOPIC), 3), want);
});

test("settling a seq moves the consumer's cursor", () => {
  const c = cursor([]);
  new TelemetrySource(c, SITE, () => NS, TOPIC).settled(42);
  assert.deepEqual(c.settled, [42]);
});
