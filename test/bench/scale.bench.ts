// The scaling table: `sitegate run` under the unit's node flags and environment
// (systemd/sitegate.service), polling N simulated SunSpec TCP devices (ten per TCP port,
// storage, PV and meter models in turn) every second and pushing to a partner sink, for
// N = 10, 50, 200, 500 (BENCH_QUICK=1: 10 and 50, shorter runs). The simulator runs as its
// own process. Per N, over a window after a warm-up, from /proc/PID of the daemon:
// - RSS: the median of one-second samples (MiB);
// - CPU: (utime + stime) over the window, % of one core;
// - bytes written a day over the window: what the data dir's own card was sent (a small
//   ext4 on a loop device, test/support/card-device.ts: data, metadata and journal, nothing
//   of another process), or, where no card can be mounted (not root), write_bytes of
//   /proc/PID/io;
// - reads per second the poller did, against N (ratio = reads / (N x 1/s): 1.00x = it keeps up).
// Then the slope per device of each (least squares over the N measured) and, for RSS and
// CPU, the per-device cost of the last step against the first (a figure far above 1 would
// be something growing faster than linearly). CPU figures are noisy on a shared machine.
// The write budget: at 4 and 50 devices, with the default commit interval and with 1 s,
// bytes written per sample committed against the packed bytes of the sample (the
// amplification; goal <= 3x), bytes a day and write calls a second; at 4 devices and the
// defaults (over four commits), written per sample against the budget of 15 B, and the same
// by /proc/PID/io beside it.
// BENCH_SCALE="10 50 200" picks other sizes; BENCH_NODE_EXTRA adds node flags (--cpu-prof ...);
// BENCH_CARD=0 measures by /proc/PID/io on this machine's file system; BENCH_CARD_MOUNT sets
// the card's mount options (default noatime).
import { spawnSim, type SimProcess } from "../support/sim-process.js";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { BenchFn, BenchRow } from "./types.js";
import { partnerTo, startSink, type PartnerSink } from "../support/partner-sink.js";
import { spawnDaemon, stopDaemon, writeConfig } from "../support/cli.js";
import { testConfigInput } from "../support/config.js";
import { tcpDevice } from "../support/gateway.js";
import { rssKb, unitCommand } from "../support/site50.js";
import { makeTmpDir } from "../support/tmp.js";
import { cardUnavailable, mountCard, type CardDevice } from "../support/card-device.js";
import { freePort } from "../support/net.js";
import { daemonMetric } from "../support/db.js";
import { TELEMETRY_COMMIT_S } from "../../src/config/schema.js";

const MODELS = ["sunspec-storage", "sunspec-pv", "sunspec-meter"] as const;
const PER_PORT = 10;
/** Bytes written per sample at the defaults (4 devices, 1 s polls), at the most: issue 43, docs/sd-card.md. */
const SAMPLE_BUDGET_B = 15;
/** Clock ticks per second of /proc/PID/stat (USER_HZ: 100 on Linux, arm64 included). */
const CLK_TCK = 100;

export interface ScalePoint {
  devices: number;
  rssMiB: number;
  /** Private (anonymous) resident memory: RSS less the mapped node binary and libraries. */
  anonMiB: number;
  cpuPct: number;
  bytesPerDay: number;
  writeCallsPerS: number;
  readsPerS: number;
  /** Samples committed per second, and the bytes of those packed samples (the write budget's reference). */
  samplesPerS: number;
  sampleBytesPerS: number;
  commitS: number;
  /**
   * Bytes written over the samples committed in the same window: what the data dir's own
   * card (test/support/card-device.ts) was sent, where this machine can mount one, else
   * write_bytes of /proc/PID/io (`measure` says which).
   */
  writtenPerSample: number;
  measure: "card" | "proc";
  /** write_bytes of /proc/PID/io over the same samples, whichever `measure` is. */
  procWrittenPerSample: number;
  bytesPerSample: number;
  /** What a sample takes with each snapshot packed alone (no deltas: the store's earlier format). */
  alonePerSample: number;
}

/** utime + stime of a process, in seconds. */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  // Fields after the command name (which may hold spaces) start after the last ')'.
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(f[11]) + Number(f[12])) / CLK_TCK;
}

/** write_bytes and syscw of /proc/PID/io. */
export function ioCounters(pid: number): { writeBytes: number; writeCalls: number } {
  const io = readFileSync(`/proc/${pid}/io`, "utf8");
  const get = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+)`, "m").exec(io)?.[1] ?? NaN);
  return { writeBytes: get("write_bytes"), writeCalls: get("syscw") };
}

/** Least-squares slope of y over x. */
export function slope(xs: number[], ys: number[]): number {
  const n = xs.length;
  const mx = xs.reduce((a, b) => a + b, 0) / n;
  const my = ys.reduce((a, b) => a + b, 0) / n;
  let num = 0;
  let den = 0;
  for (let i = 0; i < n; i++) {
    num += (xs[i] - mx) * (ys[i] - my);
    den += (xs[i] - mx) ** 2;
  }
  return den ? num / den : NaN;
}

/** RssAnon of /proc/PID/status (kB). */
function anonKb(pid: number): number {
  const m = /^RssAnon:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) : NaN;
}

/** What a point's bytes written are. */
const written = (p: ScalePoint) =>
  p.measure === "card"
    ? "written: what the data dir's own card (ext4 with its journal, 4 KiB blocks, on a loop device) was sent"
    : "written: /proc/PID/io write_bytes of the daemon (no card could be mounted)";

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function startSimProcess(dir: string, devices: number): Promise<SimProcess & { ports: number[] }> {
  const ports = Math.ceil(devices / PER_PORT);
  const sim = await spawnSim(
    dir,
    {
      seed: 3,
      control: { listen: "127.0.0.1:0" },
      site: { pv_irradiance: 0.5 },
      ports: Array.from({ length: ports }, (_, p) => ({
        kind: "tcp",
        listen: "127.0.0.1:0",
        devices: Array.from({ length: Math.min(PER_PORT, devices - p * PER_PORT) }, (_, u) => ({
          unit: u + 1,
          model: MODELS[u % 3],
          name: `d${p}-${u}`,
        })),
      })),
    },
    { LOG_LEVEL: "info" },
  );
  return { ...sim, ports: sim.tcp };
}

/** One row of the table: a fresh site of `devices` devices, warmed up, then measured over `windowMs` (at least two commit intervals). */
export async function measureSite(
  devices: number,
  warmMs: number,
  windowMs: number,
  log: (m: string) => void,
  commitS = Number(process.env.BENCH_COMMIT_S ?? TELEMETRY_COMMIT_S),
  minCommits = 2,
): Promise<ScalePoint> {
  const { dir, cleanup } = makeTmpDir();
  // BENCH_CARD=0: /proc/PID/io only, on this machine's own file system.
  const noCard = process.env.BENCH_CARD === "0" ? "BENCH_CARD=0" : cardUnavailable();
  let card: CardDevice | null = null;
  let sim: SimProcess | null = null;
  let sink: PartnerSink | null = null;
  let child: ReturnType<typeof spawnDaemon> | null = null;
  // Whatever started is stopped (and the card unmounted) in the finally, also when a later start fails.
  try {
    // BENCH_CARD_MOUNT: the card's mount options (default noatime, as Raspberry Pi OS; "noatime,lazytime" for a tuned one).
    if (noCard === null) card = mountCard(256, process.env.BENCH_CARD_MOUNT ?? "noatime");
    else log(`the data dir is on this machine's file system (${noCard}): bytes written are /proc/PID/io write_bytes`);
    const apiPort = await freePort();
    const ports = (sim = await startSimProcess(dir, devices)).ports;
    sink = await startSink();
    const unit = unitCommand();
    const base = testConfigInput(join(card?.dir ?? dir, "data"));
    const cfg = {
      ...base,
      log_level: "warn",
      http: { ...base.http, listen: `127.0.0.1:${apiPort}` },
      partner: partnerTo(sink, { headers: [] }),
      // the product default (TELEMETRY_COMMIT_S) unless BENCH_COMMIT_S says otherwise (1: a commit per poll)
      telemetry: { ...base.telemetry, poll_interval_ms: 1000, commit_interval_s: commitS },
      devices: Array.from({ length: devices }, (_, i) =>
        tcpDevice(`d${Math.floor(i / PER_PORT)}-${i % PER_PORT}`, ports[Math.floor(i / PER_PORT)], (i % PER_PORT) + 1),
      ),
    };
    // BENCH_NODE_EXTRA="--cpu-prof --cpu-prof-dir=/tmp/prof" adds node flags (for profiling).
    const extra = (process.env.BENCH_NODE_EXTRA ?? "").split(/\s+/).filter(Boolean);
    child = spawnDaemon(writeConfig(dir, cfg), {
      nodeArgs: [...unit.nodeArgs, ...extra],
      env: unit.env,
      stdio: ["ignore", "ignore", "pipe"],
    });
    let stderr = "";
    child.stderr!.on("data", (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
    const pid = child.pid!;
    await sleep(warmMs);
    // The window starts after the first telemetry commit: until then the health check writes
    // its own probe row every tick (nothing has committed yet), which a running site never does.
    const firstBy = performance.now() + commitS * 1000 + 30_000;
    while ((await storedCounters(apiPort)).samples === 0 && performance.now() < firstBy) await sleep(1000);
    if (child.exitCode !== null) throw new Error(`sitegate run exited (${child.exitCode}): ${stderr}`);
    const readsBefore = await pollerReads(sink);
    // The stored counters and write_bytes are read together: a commit (samples and the pages
    // it writes, checkpoints included) falls wholly on one side, so written per sample is exact
    // even when the window holds only a few commit intervals.
    card?.sync();
    const m0 = await storedCounters(apiPort);
    const io0 = ioCounters(pid);
    const card0 = card?.written() ?? 0;
    const cpu0 = cpuSeconds(pid);
    const t0 = performance.now();
    const rss: number[] = [];
    const anon: number[] = [];
    // At least `minCommits` commit intervals (2; 4 for the budget's row): a shorter window holds
    // zero or one commit, so bytes written (and written per sample) would be 0, NaN or one
    // commit's pages scaled to a day, and with two a commit that writes one block more moves
    // the figure by half a block a commit.
    // A commit interval's timer starts at the first snapshot after a commit, so commits come
    // up to a poll (1 s) later than the interval: 2 s a commit of margin.
    const spanMs = Math.max(windowMs, minCommits * (commitS * 1000 + 2000));
    while (performance.now() - t0 < spanMs) {
      await sleep(1000);
      rss.push(rssKb(pid, "VmRSS") / 1024);
      anon.push(anonKb(pid) / 1024);
    }
    const secs = (performance.now() - t0) / 1000;
    const cpu1 = cpuSeconds(pid);
    card?.sync();
    const m1 = await storedCounters(apiPort);
    const io1 = ioCounters(pid);
    const sent = card ? card.written() - card0 : io1.writeBytes - io0.writeBytes;
    const readsAfter = await pollerReads(sink);
    const seen = new Set(sink.accepted().flatMap((r) => (r.body?.devices ?? []).map((d: { device_id: string }) => d.device_id))).size;
    const p: ScalePoint = {
      devices,
      rssMiB: median(rss),
      anonMiB: median(anon),
      cpuPct: ((cpu1 - cpu0) / secs) * 100,
      bytesPerDay: (sent / secs) * 86_400,
      writeCallsPerS: (io1.writeCalls - io0.writeCalls) / secs,
      readsPerS: (readsAfter - readsBefore) / secs,
      samplesPerS: (m1.samples - m0.samples) / secs,
      sampleBytesPerS: (m1.bytes - m0.bytes) / secs,
      commitS,
      writtenPerSample: sent / (m1.samples - m0.samples),
      measure: card ? "card" : "proc",
      procWrittenPerSample: (io1.writeBytes - io0.writeBytes) / (m1.samples - m0.samples),
      bytesPerSample: (m1.bytes - m0.bytes) / (m1.samples - m0.samples),
      alonePerSample: (m1.alone - m0.alone) / (m1.samples - m0.samples),
    };
    log(
      `${devices} devices: RSS ${p.rssMiB.toFixed(1)} MiB, ${p.anonMiB.toFixed(1)} anonymous (samples ${rss.map((r) => r.toFixed(0)).join(" ")}), CPU ${p.cpuPct.toFixed(1)} %, ${(p.bytesPerDay / 1e6).toFixed(1)} MB/day written, ${p.writeCallsPerS.toFixed(1)} write calls/s, ${p.readsPerS.toFixed(1)} device readings/s pushed, ${seen} devices reached the partner; commit every ${commitS} s: ${p.samplesPerS.toFixed(0)} samples/s stored at ${p.bytesPerSample.toFixed(2)} B (${p.alonePerSample.toFixed(2)} B packed alone), ${p.writtenPerSample.toFixed(1)} B written per sample (${(p.writtenPerSample / p.bytesPerSample).toFixed(1)}x; ${card ? `sent to the card ${card.device}; /proc/PID/io ${p.procWrittenPerSample.toFixed(1)} B` : "/proc/PID/io"})`,
    );
    if (seen < devices) throw new Error(`only ${seen} of ${devices} devices reached the partner: ${stderr}`);
    return p;
  } finally {
    if (child) await stopDaemon(child);
    await sink?.stop();
    await sim?.stop();
    card?.close();
    cleanup();
  }
}

/** The daemon's telemetry counters from its /metrics. */
async function storedCounters(port: number): Promise<{ samples: number; bytes: number; alone: number }> {
  const url = `https://127.0.0.1:${port}`;
  const [samples, bytes, alone] = await Promise.all(
    ["sitegate_samples_stored_total", "sitegate_samples_stored_bytes_total", "sitegate_samples_stored_alone_bytes_total"].map((n) =>
      daemonMetric(url, n),
    ),
  );
  return { samples, bytes, alone };
}

/** Device readings that reached the partner so far (one per device per pushed snapshot). */
async function pollerReads(sink: Awaited<ReturnType<typeof startSink>>): Promise<number> {
  let n = 0;
  for (const r of sink.accepted()) {
    const body = r.body as { devices?: Array<{ samples?: unknown[] }> } | undefined;
    for (const d of body?.devices ?? []) n += Array.isArray(d.samples) ? d.samples.length : 1;
  }
  return n;
}

const bench: BenchFn = async (ctx) => {
  const sizes = process.env.BENCH_SCALE
    ? process.env.BENCH_SCALE.split(/[\s,]+/)
        .filter(Boolean)
        .map(Number)
    : ctx.quick
      ? [10, 50]
      : [10, 50, 200, 500];
  const warmMs = ctx.quick ? 6000 : 15000;
  const windowMs = ctx.quick ? 12000 : 60000;
  const unit = unitCommand();
  ctx.log(
    `node ${unit.nodeArgs.join(" ")}; ${sizes.join(", ")} devices, warm-up ${warmMs / 1000} s, window ${windowMs / 1000} s (at least two commit intervals)`,
  );
  const pts: ScalePoint[] = [];
  for (const n of sizes) pts.push(await measureSite(n, warmMs, windowMs, ctx.log));
  // The write budget: 4 and 50 devices, at the default commit interval and at 1 s (a commit per poll).
  const budget: ScalePoint[] = [];
  const defaultCommit = Number(process.env.BENCH_COMMIT_S ?? TELEMETRY_COMMIT_S);
  for (const [n, c] of [
    [4, defaultCommit],
    [4, 1],
    [50, defaultCommit],
    [50, 1],
  ] as const) {
    // The budget's own row over four commits; the others over two.
    const commits = n === 4 && c === defaultCommit ? 4 : 2;
    budget.push(pts.find((p) => p.devices === n && p.commitS === c) ?? (await measureSite(n, warmMs, windowMs, ctx.log, c, commits)));
  }
  const rows: BenchRow[] = [];
  for (const p of budget) {
    const what = `write budget, ${p.devices} devices at 1 s, commit every ${p.commitS} s`;
    if (p.devices === 4 && p.commitS === defaultCommit)
      rows.push({
        name: `${what}: written per sample, against the budget`,
        value: p.writtenPerSample,
        unit: "B",
        reference: SAMPLE_BUDGET_B,
        ratio: SAMPLE_BUDGET_B / p.writtenPerSample,
        note: `the budget at the defaults: <= ${SAMPLE_BUDGET_B} B written a sample (ratio >= 1 meets it); a power cut loses at most ${p.commitS} s; ${written(p)}`,
      });
    rows.push({
      name: `${what}: written per sample, /proc/PID/io`,
      value: p.procWrittenPerSample,
      unit: "B",
      reference: p.writtenPerSample,
      ratio: p.procWrittenPerSample / p.writtenPerSample,
      note: "write_bytes of the daemon (the pages it dirtied) over the same samples; reference: the row above",
    });
    rows.push({
      name: `${what}: written per sample`,
      value: p.writtenPerSample,
      unit: "B",
      reference: p.alonePerSample,
      ratio: p.writtenPerSample / p.alonePerSample,
      note: "reference: the sample packed alone (each snapshot without deltas, the store's earlier format); goal <= 3x",
    });
    rows.push({
      name: `${what}: written per stored byte`,
      value: p.writtenPerSample,
      unit: "B",
      reference: p.bytesPerSample,
      ratio: p.writtenPerSample / p.bytesPerSample,
      note: "reference: the bytes the sample is stored in (deltas); the amplification",
    });
    rows.push({
      name: `${what}: stored per sample`,
      value: p.bytesPerSample,
      unit: "B",
      reference: p.alonePerSample,
      ratio: p.bytesPerSample / p.alonePerSample,
      note: "deltas against the sample packed alone (below 1: what deltas save)",
    });
    rows.push({
      name: `${what}: written per day`,
      value: p.bytesPerDay / 1e6,
      unit: "MB/day",
      reference: (p.sampleBytesPerS * 86_400) / 1e6,
      ratio: p.bytesPerDay / (p.sampleBytesPerS * 86_400),
      note: `${written(p)}; reference: the samples' own bytes a day`,
    });
    rows.push({
      name: `${what}: write calls`,
      value: p.writeCallsPerS,
      unit: "calls/s",
      reference: null,
      ratio: null,
      note: "syscw of /proc/PID/io: files and sockets (the partner push) alike",
    });
  }
  for (const p of pts) {
    rows.push({
      name: `scale ${p.devices} TCP devices at 1 s, RSS`,
      value: p.rssMiB,
      unit: "MiB",
      reference: null,
      ratio: null,
      note: "unit's node flags",
    });
    rows.push({
      name: `scale ${p.devices} TCP devices at 1 s, RSS anonymous`,
      value: p.anonMiB,
      unit: "MiB",
      reference: null,
      ratio: null,
      note: "RSS less file-backed pages (node binary)",
    });
    rows.push({
      name: `scale ${p.devices} TCP devices at 1 s, CPU`,
      value: p.cpuPct,
      unit: "% of a core",
      reference: 100,
      ratio: 100 / Math.max(p.cpuPct, 0.01),
      note: "one core = 100 % (headroom; noisy: shared machine)",
    });
    rows.push({
      name: `scale ${p.devices} TCP devices at 1 s, readings pushed`,
      value: p.readsPerS,
      unit: "readings/s",
      reference: p.devices,
      ratio: p.readsPerS / p.devices,
      note: "one reading per device per second (keeps up)",
    });
    rows.push({
      name: `scale ${p.devices} TCP devices at 1 s, written`,
      value: p.bytesPerDay / 1e6,
      unit: "MB/day",
      reference: null,
      ratio: null,
      note: "/proc/PID/io write_bytes",
    });
  }
  if (pts.length >= 2) {
    const xs = pts.map((p) => p.devices);
    const rssSlope = slope(
      xs,
      pts.map((p) => p.rssMiB),
    );
    const anonSlope = slope(
      xs,
      pts.map((p) => p.anonMiB),
    );
    const cpuSlope = slope(
      xs,
      pts.map((p) => p.cpuPct),
    );
    const wSlope = slope(
      xs,
      pts.map((p) => p.bytesPerDay),
    );
    rows.push({
      name: "scale slope, RSS per device",
      value: rssSlope * 1024,
      unit: "KiB/device",
      reference: null,
      ratio: null,
      note: `least squares over ${xs.join(", ")}`,
    });
    rows.push({
      name: "scale slope, anonymous RSS per device",
      value: anonSlope * 1024,
      unit: "KiB/device",
      reference: null,
      ratio: null,
      note: `least squares over ${xs.join(", ")}`,
    });
    rows.push({
      name: "scale slope, CPU per device",
      value: cpuSlope,
      unit: "% of a core/device",
      reference: null,
      ratio: null,
      note: `least squares over ${xs.join(", ")}`,
    });
    rows.push({
      name: "scale slope, written per device",
      value: wSlope / 1e6,
      unit: "MB/day/device",
      reference: null,
      ratio: null,
      note: `least squares over ${xs.join(", ")}`,
    });
    if (pts.length >= 3) {
      // Per-device cost of the last step against the first: ~1 when linear.
      const step = (f: (p: ScalePoint) => number, i: number) => (f(pts[i + 1]) - f(pts[i])) / (pts[i + 1].devices - pts[i].devices);
      const last = pts.length - 2;
      for (const [what, f] of [
        ["RSS", (p: ScalePoint) => p.rssMiB],
        ["CPU", (p: ScalePoint) => p.cpuPct],
      ] as const) {
        const a = step(f, 0);
        const b = step(f, last);
        rows.push({
          name: `scale linearity, ${what} per device ${pts[last].devices}->${pts[last + 1].devices} vs ${pts[0].devices}->${pts[1].devices}`,
          value: b,
          unit: what === "RSS" ? "MiB/device" : "%/device",
          reference: a,
          ratio: a / b,
          note: "first step's per-device cost (1.00x = linear)",
        });
      }
    }
  }
  return rows;
};
export default bench;
