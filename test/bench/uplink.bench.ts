// Sample store and uplink figures, each against a reference measured in the same run:
// ingest vs a bare better-sqlite3 loop of naive rows; bytes per sample on disk vs that
// naive row; backlog drain rate vs the demo site's ingest rate; store-to-partner latency
// vs a bare HTTPS POST to the same sink, both in a child under the unit's node flags (and
// the same POST with no flags: the flags' own cost). The latency rows are the daemon's
// default telemetry.commit_interval_s (a snapshot is pushed as it is taken and committed
// with the others of its interval); one more row commits every snapshot (fsynced) before
// it is pushed, as a commit interval of 1 s does.
import { statSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import https from "node:https";
import type { BenchFn, BenchRow } from "./types.js";
import { snapshot, startUplink } from "../support/uplink-harness.js";
import { startSink } from "../support/partner-sink.js";
import { testCert } from "../support/tls.js";
import { flagSets, runInChild } from "./in-child.js";
import { TELEMETRY_COMMIT_S } from "../../src/config/schema.js";

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
    const tx = ndb.transaction((batch: typeof flat) => {
      for (const r of batch) ins.run(...r);
    });
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
  rows.push({
    name: "sample-store ingest",
    value: ours.rate,
    unit: "samples/s",
    reference: naive.rate,
    ratio: ours.rate / naive.rate,
    note: "bare better-sqlite3 loop, naive rows",
  });
  rows.push({
    name: "bytes on disk per sample",
    value: ours.bytes,
    unit: "B",
    reference: naive.bytes,
    ratio: naive.bytes / ours.bytes,
    note: "naive row (ts, device, metric, value)",
  });

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
  rows.push({
    name: "backlog drain after an outage",
    value: drainRate,
    unit: "snapshots/s",
    reference: DEMO_SNAPSHOTS_PER_S,
    ratio: drainRate / DEMO_SNAPSHOTS_PER_S,
    note: "demo site ingest rate",
  });

  await rig3.stop();
  await sink.stop();

  // Latency under the unit's node flags, ours and the reference in one child; the reference
  // once more with no flags (the flags' own cost).
  const { unit, plain } = flagSets();
  // p99 of 200 is the second-worst push, of 600 the sixth: one GC pause does not make the row.
  const n = ctx.quick ? 200 : 600;
  const self = import.meta.url;
  const flagged = await runInChild<Latency>(self, "latencyFigures", { n, dir: join(ctx.dir, "latency-flags") }, unit);
  const none = await runInChild<Latency>(self, "latencyFigures", { n, dir: join(ctx.dir, "latency-plain") }, plain);
  const ms = (xs: number[]) => `p50 ${percentile(xs, 50).toFixed(2)} ms, p99 ${percentile(xs, 99).toFixed(2)} ms`;
  ctx.log(
    `latency, unit's node flags: ours ${ms(flagged.ours)}, bare ${ms(flagged.bare)}; no node flags: ours ${ms(none.ours)}, bare ${ms(none.bare)}`,
  );
  const note = "bare node:https keep-alive POST to the same sink, unit's node flags";
  ctx.log(`latency, every snapshot committed before its push, unit's node flags: ${ms(flagged.oursAtOnce)}`);
  for (const p of [50, 99]) {
    const v = percentile(flagged.ours, p);
    const b = percentile(flagged.bare, p);
    rows.push({ name: `poll-to-partner latency p${p}`, value: v, unit: "ms", reference: b, ratio: b / v, note });
  }
  const once = percentile(flagged.oursAtOnce, 99);
  const bare99 = percentile(flagged.bare, 99);
  rows.push({
    name: "poll-to-partner latency p99, each snapshot fsynced first",
    value: once,
    unit: "ms",
    reference: bare99,
    ratio: bare99 / once,
    note: `${note}; commit_interval_s <= 1`,
  });
  const fb = percentile(flagged.bare, 99);
  const pb = percentile(none.bare, 99);
  rows.push({
    name: "flags' own cost: bare HTTPS POST p99, unit's node flags",
    value: fb,
    unit: "ms",
    reference: pb,
    ratio: pb / fb,
    note: "the same POST, no node flags (lower is better)",
  });
  return rows;
};
export default bench;

interface Latency {
  /** At the default commit interval. */
  ours: number[];
  /** Every snapshot committed (fsynced) before the push. */
  oursAtOnce: number[];
  bare: number[];
}

/**
 * Runs in a child (in-child.ts) under the flags measured. Ours: append one demo snapshot to
 * the store (as the poller does: at the default commit interval, and, on a second store,
 * committed at once) until the sink has the push. Reference: a bare
 * node:https keep-alive POST of a snapshot (the uplink's client, same headers) until the
 * sink has it. The sink runs in the same process for both; both connections are warm; the
 * two loops alternate, and each starts its clock with no request outstanding.
 */
export async function latencyFigures(arg: { n: number; dir: string }): Promise<Latency> {
  const sink = await startSink();
  let want: { marker: number; done: () => void } | null = null;
  sink.onRequest = (r) => {
    const b = r.body as { devices?: Array<{ metrics?: { energy_import_wh?: number } }> } | null;
    if (want && b?.devices?.[0]?.metrics?.energy_import_wh === 100000 + want.marker) want.done();
  };
  const seen = (marker: number) =>
    new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the sink did not get snapshot ${marker} in 10 s`)), 10_000);
      want = {
        marker,
        done: () => {
          clearTimeout(timer);
          want = null;
          resolve();
        },
      };
    });
  const ours: number[] = [];
  const oursAtOnce: number[] = [];
  const bare: number[] = [];
  const agent = new https.Agent({ keepAlive: true, maxSockets: 8, ca: testCert().cert });
  const post = (body: string) =>
    new Promise<void>((resolve, reject) => {
      const req = https.request(
        `${sink.url}/bare`,
        {
          method: "POST",
          agent,
          headers: {
            "content-type": "application/json",
            "content-length": Buffer.byteLength(body),
            "X-Partner-Key": "k-123",
            "X-Trace": "bench",
          },
        },
        (res) => {
          res.resume();
          res.on("end", resolve);
        },
      );
      req.on("error", reject);
      req.end(body);
    });
  try {
    const rig = await startUplink(arg.dir, sink, { commitIntervalMs: TELEMETRY_COMMIT_S * 1000 });
    const rigAtOnce = await startUplink(`${arg.dir}-at-once`, sink);
    try {
      // Both loops time the same thing the same way: from handing over a snapshot to the sink
      // having it, each clock started once the previous answer was read (ours: the push
      // settled). They take turns in chunks of 10, five warm-up rounds each first, so
      // start-up garbage and GC fall on both alike.
      let seq = 10;
      const oursOnce = async (r: typeof rig, into: number[] | null) => {
        const marker = seq++;
        // The previous push settled (its answer read), as the bare loop awaits its answer.
        while (r.samples.stats().pending_snapshots > 0) await new Promise((res) => setImmediate(res));
        const got = seen(marker);
        const t = performance.now();
        r.samples.append(snapshot(marker, DEMO_DEVICES));
        await got;
        into?.push(performance.now() - t);
      };
      const bareOnce = async (keep: boolean) => {
        const marker = seq++;
        const got = seen(marker);
        const t = performance.now();
        const answered = post(JSON.stringify(snapshot(marker, DEMO_DEVICES)));
        await got;
        if (keep) bare.push(performance.now() - t);
        await answered;
      };
      for (let i = 0; i < 5; i++) await oursOnce(rig, null);
      for (let i = 0; i < 5; i++) await oursOnce(rigAtOnce, null);
      for (let i = 0; i < 5; i++) await bareOnce(false);
      for (let done = 0; done < arg.n; done += 10) {
        const k = Math.min(10, arg.n - done);
        for (let i = 0; i < k; i++) await oursOnce(rig, ours);
        for (let i = 0; i < k; i++) await bareOnce(true);
        for (let i = 0; i < k; i++) await oursOnce(rigAtOnce, oursAtOnce);
      }
    } finally {
      await rig.stop();
      await rigAtOnce.stop();
    }
  } finally {
    agent.destroy();
    await sink.stop();
  }
  return { ours, oursAtOnce, bare };
}
