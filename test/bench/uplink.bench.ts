// Sample store and uplink figures, each against a reference measured in the same run:
// ingest vs a bare better-sqlite3 loop of naive rows; bytes per sample on disk vs that
// naive row; backlog drain rate vs the demo site's ingest rate; store-to-partner latency
// vs a bare HTTPS POST round trip.
import { statSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { request, Agent } from "undici";
import type { BenchFn, BenchRow } from "./types.js";
import { snapshot, startUplink } from "../support/uplink-harness.js";
import { startSink } from "../support/partner-sink.js";
import { testCert } from "../support/tls.js";

/** The demo site: 5 devices, ~10 metrics each, one snapshot per second. */
const DEMO_DEVICES = 5;
const DEMO_SNAPSHOTS_PER_S = 1;

function dirBytes(dir: string, base: string): number {
  let total = 0;
  for (const suffix of ["", "-wal", "-shm"]) {
    try {
      total += statSync(join(dir, base + suffix)).size;
    } catch {
      /* absent */
    }
  }
  return total;
}

function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}

const bench: BenchFn = async (ctx) => {
  const rows: BenchRow[] = [];
  const snaps = ctx.quick ? 2000 : 20000;
  const devices = 10;
  const perSnap = devices * 3;
  const samples = snaps * perSnap;
  const data = Array.from({ length: snaps }, (_, i) => snapshot(i, devices));

  // Reference: a bare loop, one naive row per sample, 5000 rows per transaction.
  const { mkdirSync } = await import("node:fs");
  const flat: Array<[number, string, string, number]> = [];
  for (const s of data) for (const d of s.devices) for (const [m, v] of Object.entries(d.metrics)) flat.push([s.ts, d.device_id, m, v]);
  const naiveRun = (dir: string): { rate: number; bytes: number } => {
    mkdirSync(dir, { recursive: true });
    const ndb = new Database(join(dir, "naive.db"));
    ndb.pragma("journal_mode = WAL");
    ndb.pragma("synchronous = NORMAL");
    ndb.exec("CREATE TABLE s (ts INTEGER, device TEXT, metric TEXT, value REAL)");
    const ins = ndb.prepare("INSERT INTO s VALUES (?, ?, ?, ?)");
    const tx = ndb.transaction((batch: typeof flat) => { for (const r of batch) ins.run(...r); });
    const t0 = performance.now();
    for (let i = 0; i < flat.length; i += 5000) tx(flat.slice(i, i + 5000));
    const rate = samples / ((performance.now() - t0) / 1000);
    ndb.pragma("wal_checkpoint(TRUNCATE)");
    ndb.close();
    return { rate, bytes: dirBytes(dir, "naive.db") / samples };
  };

  // Ours: one commit per poll-cycle snapshot (what the poller does), partner away.
  const sink = await startSink();
  await sink.refuse();
  const ourRun = async (dir: string): Promise<{ rate: number; bytes: number }> => {
    const rig = await startUplink(dir, sink, { backoff: () => 60_000 });
    const t0 = performance.now();
    for (const s of data) rig.samples.append(s);
    const rate = samples / ((performance.now() - t0) / 1000);
    rig.storage.db.pragma("wal_checkpoint(TRUNCATE)");
    const bytes = dirBytes(dir, "sitegate.db") / samples;
    await rig.stop();
    return { rate, bytes };
  };
  // Alternate the two, three rounds each on fresh files, and keep each one's best: warm-up
  // and machine noise must not decide the ratio.
  let naive = { rate: 0, bytes: 0 };
  let ours = { rate: 0, bytes: 0 };
  for (let round = 0; round < 3; round++) {
    const n = naiveRun(join(ctx.dir, `naive-${round}`));
    const o = await ourRun(join(ctx.dir, `ours-${round}`));
    if (n.rate > naive.rate) naive = n;
    if (o.rate > ours.rate) ours = o;
  }
  rows.push({ name: "sample-store ingest", value: ours.rate, unit: "samples/s", reference: naive.rate, ratio: ours.rate / naive.rate, note: "bare better-sqlite3 loop, naive rows" });
  rows.push({ name: "bytes on disk per sample", value: ours.bytes, unit: "B", reference: naive.bytes, ratio: naive.bytes / ours.bytes, note: "naive row (ts, device, metric, value)" });

  // Backlog drain: restart the uplink with the partner back; time until all is settled.
  await sink.accept();
  const drainN = ctx.quick ? 500 : 3000;
  const rig2 = await startUplink(join(ctx.dir, "drain"), sink, { backoff: () => 60_000 });
  await rig2.uplink.stop(); // fill first, with no sender running
  for (let i = 0; i < drainN; i++) rig2.samples.append(snapshot(i, DEMO_DEVICES));
  await rig2.stop();
  const before = sink.requests.length;
  const t0 = performance.now();
  const rig3 = await startUplink(join(ctx.dir, "drain"), sink);
  await sink.waitFor(() => sink.requests.length - before >= drainN, 120_000, "drain");
  const drainRate = drainN / ((performance.now() - t0) / 1000);
  rows.push({ name: "backlog drain after an outage", value: drainRate, unit: "snapshots/s", reference: DEMO_SNAPSHOTS_PER_S, ratio: drainRate / DEMO_SNAPSHOTS_PER_S, note: "demo site ingest rate" });

  // Latency: append -> sink receipt, live; reference: a bare HTTPS POST round trip.
  const lat: number[] = [];
  const n = ctx.quick ? 50 : 300;
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    const seq = drainN + 10 + i;
    const got = sink.waitFor(() => sink.requests.some((r) => r.body?.devices?.[0]?.metrics?.energy_import_wh === 100000 + seq), 10000);
    rig3.samples.append(snapshot(seq, DEMO_DEVICES));
    await got;
    lat.push(performance.now() - t);
  }
  await rig3.stop();
  const agent = new Agent({ connect: { ca: testCert().cert } });
  const bare: number[] = [];
  const body = JSON.stringify(snapshot(1, DEMO_DEVICES));
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    const r = await request(`${sink.url}/bare`, { method: "POST", body, dispatcher: agent, headers: { "content-type": "application/json" } });
    await r.body.dump();
    bare.push(performance.now() - t);
  }
  await agent.close();
  await sink.stop();
  const p50 = percentile(lat, 50);
  const p99 = percentile(lat, 99);
  const b50 = percentile(bare, 50);
  const b99 = percentile(bare, 99);
  rows.push({ name: "poll-to-partner latency p50", value: p50, unit: "ms", reference: b50, ratio: b50 / p50, note: "bare HTTPS POST round trip" });
  rows.push({ name: "poll-to-partner latency p99", value: p99, unit: "ms", reference: b99, ratio: b99 / p99, note: "bare HTTPS POST round trip" });
  return rows;
};
export default bench;
