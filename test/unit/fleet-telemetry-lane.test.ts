import { test } from "node:test";
import assert from "node:assert/strict";
import { SnapshotSource } from "../../src/delivery/snapshot-source.js";
import type { LaneItem } from "../../src/delivery/lane.js";
import { DataPushWriter, MAX_PAYLOAD_BYTES, buildPayloads } from "../../src/uplink/data-push.js";
import type { StoredSnapshot, TelemetryCursor } from "../../src/telemetry/sample-store.js";

const SITE = 'site-"ü"-001';
const NS = "0f1e2d3c-aaaa-bbbb-cccc-000000000001";
const TOPIC = "sitegate/site-001/telemetry";

/** A cursor over fixed snapshots (what the sample store's consumer gives). */
function cursor(snaps: StoredSnapshot[]): TelemetryCursor & { settled: number[] } {
  const settled: number[] = [];
  return {
    name: "fleet_telemetry",
    get through() {
      return settled.at(-1) ?? 0;
    },
    backlog: snaps.length,
    settled,
    pending: (limit, after = 0) => snaps.filter((s) => s.id > after).slice(0, limit),
    settleThrough: (id) => settled.push(id),
  };
}

interface Sent {
  snapshot: number;
  part: number;
  address: string;
  body: string;
  key: string;
  kind: string;
}

/** What the data push's builder gives for the same snapshots. */
function expected(snaps: StoredSnapshot[]): Sent[] {
  return snaps.flatMap((s) =>
    buildPayloads(s, SITE, NS).map((p, part) => ({
      snapshot: s.id,
      part,
      address: TOPIC,
      body: p.body,
      key: p.idempotencyKey,
      kind: "telemetry",
    })),
  );
}

function lane(c: TelemetryCursor, batch: number): SnapshotSource {
  const writer = new DataPushWriter(SITE, () => NS);
  return new SnapshotSource(c, { kind: "telemetry", address: TOPIC, encode: (s) => writer.encode(s), batch, maxAhead: 1e9 });
}

function readAll(source: SnapshotSource): LaneItem[] {
  const out: LaneItem[] = [];
  for (let item = source.next(new Set()); item; item = source.next(new Set())) out.push(item);
  return out;
}

const sent = (items: LaneItem[]): Sent[] =>
  items.map((i) => ({
    snapshot: i.describe.snapshot as number,
    part: i.describe.push_part as number,
    address: i.address,
    body: i.body,
    key: i.key,
    kind: i.kind,
  }));

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
  for (const max of [1, 2, 32]) assert.deepEqual(sent(readAll(lane(cursor(snaps), max))), expected(snaps), `read ${max} at a time`);
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
  assert.deepEqual(sent(readAll(lane(cursor(snaps), 3))), want);
});

test("the cursor moves only over settled snapshots, all of their parts, whatever order the answers come in", () => {
  const ts = Date.UTC(2026, 10, 22, 12, 0, 0);
  const big = Array.from({ length: 2 }, (_, i) => device(`d${i}`, { m: i, pad: 0, [`x${"y".repeat(MAX_PAYLOAD_BYTES / 2)}`]: 1 }));
  const snaps: StoredSnapshot[] = [
    { id: 1, ts, devices: [device("a", { power_w: 1 })] },
    { id: 2, ts, devices: big },
    { id: 3, ts, devices: [] },
    { id: 5, ts, devices: [device("a", { power_w: 2 })] },
  ];
  const c = cursor(snaps);
  const items = readAll(lane(c, 32));
  assert.deepEqual(
    items.map((i) => i.ref),
    ["s1:0", "s2:0", "s2:1", "s5:0"],
    "snapshot 2 in two parts, 3 has nothing to send",
  );
  const [one, twoA, twoB, five] = items;
  five!.settle();
  twoB!.settle();
  assert.deepEqual(c.settled, [], "nothing before the oldest open snapshot is settled");
  one!.settle();
  assert.deepEqual(c.settled, [1], "snapshot 2 still has a part in flight");
  twoA!.settle();
  assert.deepEqual(c.settled, [1, 5], "2, the empty 3 and 5 in one move");
});
