// `make fleet-scale`: FLEET_GATEWAYS (50) real gateways against one mosquitto through a
// broker outage of FLEET_OUTAGE_S (30 s) (the world: fleet-scale-world.ts). The sequence:
// warm-up (every site has delivered telemetry, then FLEET_WARM_S), a steady window
// (FLEET_STEADY_S), the broker stopped (SIGTERM: it saves its sessions) with a plain TCP
// listener on its port that counts and closes each connect, the broker started again on the
// same port, the drain (until every site has delivered a snapshot taken after the restart),
// a signed `ping` to every site, and a window after (FLEET_AFTER_S). Then the gateways stop
// and each one's telemetry store (the ground truth of what it polled) is compared with what
// the subscriber received. Figures only, no assertion: docs/fleet.md, "fleet-scale", states
// the targets (RSS flat within 10 MiB, 0 lost, 0 duplicated, attempts falling by backoff, no
// offline status for an outage shorter than will_delay_s).
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { readTelemetry } from "../support/db.js";
import { countConnects, perBucket } from "../support/connect-counter.js";
import { makeTmpDir } from "../support/tmp.js";
import { cpuSeconds } from "./scale.bench.js";
import { DEVICES_PER_GATEWAY, startFleetWorld, type FleetWorld } from "./fleet-scale-world.js";

export interface FleetScaleOpts {
  gateways: number;
  outageS: number;
  warmS: number;
  steadyS: number;
  afterS: number;
  /** How the broker goes down: SIGTERM (a clean stop: mosquitto publishes every Last Will) or SIGKILL (a crash). */
  brokerStop?: NodeJS.Signals;
  /** The gateways' fleet.will_delay_s (the product's default 60). */
  willDelayS?: number;
}

type Phase = "before" | "during" | "after";
const PHASES: Phase[] = ["before", "during", "after"];

export interface FleetScaleResult {
  opts: FleetScaleOpts;
  host: string;
  /** Per phase: per-gateway private RSS (MiB) and CPU (% of one core). */
  rss: Record<Phase, number[]>;
  cpu: Record<Phase, number[]>;
  /** Per gateway: |RSS during - before| and |after - before| (MiB). */
  rssDrift: { during: number[]; after: number[] };
  snapshots: number;
  stored: number;
  lost: number;
  /** Received twice: published twice (a resend by the gateway), and redelivered by the broker on the subscriber's own session. */
  duplicated: number;
  redelivered: number;
  outOfOrder: number;
  /** Sites with a loss or a duplicate, as "site: lost/dup". */
  badSites: string[];
  backlog: number;
  /** Connects per second, per `bucketS` of the outage. */
  attemptsPerS: number[];
  bucketS: number;
  /** Retained status per site after the drain (a fresh subscription): online, and anything else. */
  retainedOnline: number;
  retainedOther: number;
  /** Per gateway: s from its reconnect to its first snapshot taken after the restart (its backlog delivered). */
  siteDrainS: number[];
  attempts: number;
  offline: number;
  liveStatus: number;
  /** Per gateway: s from the broker's restart to its first connection, and connections after it. */
  reconnectS: number[];
  reconnectsPerSite: number[];
  resumed: number;
  drainS: number;
  /** Gateways still running when the run ended. */
  alive: number;
  pingMs: number[];
  pingNotOk: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms)); // wait: the phase windows and the 1 s sampler
const median = (xs: number[]) => (xs.length ? [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] : NaN);
const pct = (xs: number[], p: number) =>
  xs.length ? [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))] : NaN;

/** NaN once the process is gone (a gateway that died shows as a gap in the figures, not the end of the run). */
function privateMiB(pid: number): number {
  try {
    const m = /^RssAnon:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) / 1024 : NaN;
  } catch {
    return NaN;
  }
}

function cpuOf(pid: number): number {
  try {
    return cpuSeconds(pid);
  } catch {
    return NaN;
  }
}

/** Per-gateway RSS samples (1 s) and CPU over one phase. */
async function measurePhase(w: FleetWorld, ms: number, lastOnly: number | null): Promise<{ rss: number[]; cpu: number[] }> {
  const pids = w.sites.map((s) => s.pid);
  const c0 = pids.map(cpuOf);
  const t0 = performance.now();
  const samples: number[][] = pids.map(() => []);
  while (performance.now() - t0 < ms) {
    await sleep(1000);
    pids.forEach((p, i) => samples[i].push(privateMiB(p)));
  }
  const secs = (performance.now() - t0) / 1000;
  const cpu = pids.map((p, i) => ((cpuOf(p) - c0[i]) / secs) * 100);
  // The outage's RSS is its end (what grew by then); the others' the median of the window.
  const rss = samples.map((s) => median(lastOnly ? s.slice(-lastOnly) : s));
  return { rss, cpu };
}

export async function runFleetScale(dir: string, o: FleetScaleOpts, log: (m: string) => void): Promise<FleetScaleResult> {
  const w = await startFleetWorld(dir, o.gateways, log, undefined, o.willDelayS ?? 60);
  const sub = w.subscriber;
  try {
    const warmCeil = Date.now() + 120_000 + o.gateways * 1000;
    while (w.sites.some((s) => !sub.telemetry.get(s.id)?.length)) {
      if (Date.now() > warmCeil)
        throw new Error(`no telemetry from ${w.sites.filter((s) => !sub.telemetry.get(s.id)?.length).length} sites`);
      await sleep(500);
    }
    log(`every site delivers telemetry; warm-up ${o.warmS} s, steady ${o.steadyS} s`);
    await sleep(o.warmS * 1000);
    const before = await measurePhase(w, o.steadyS * 1000, null);

    // The outage: the subscriber leaves cleanly first (its session stays), so every connect the listener counts is a gateway's.
    const statusBefore = sub.status.length;
    await sub.disconnect();
    const outageWall = Date.now();
    await w.broker.stop(o.brokerStop);
    const counter = await countConnects(w.broker.port);
    const outageStart = performance.now();
    log(`broker stopped; outage ${o.outageS} s`);
    const during = await measurePhase(w, o.outageS * 1000, 5);
    const outageEnd = performance.now();
    await counter.close();
    // The restart is when mosquitto is started (a gateway may connect before start() has seen the port open).
    const restart = performance.now();
    const restartWall = Date.now();
    await w.broker.start();
    await sub.connect();
    log(`broker started again; draining`);

    // Drained: every site has delivered a snapshot taken after the restart (telemetry is in order).
    const drainCeil = restart + 900_000;
    const lastTs = (id: string) => sub.telemetry.get(id)?.at(-1) ?? 0;
    const drainedAt = new Map<string, number>();
    while (w.sites.some((s) => lastTs(s.id) < restartWall)) {
      for (const s of w.sites) if (!drainedAt.has(s.id) && lastTs(s.id) >= restartWall) drainedAt.set(s.id, Date.now());
      if (performance.now() > drainCeil)
        throw new Error(`${w.sites.filter((s) => lastTs(s.id) < restartWall).length} sites not drained in 900 s`);
      await sleep(100);
    }
    for (const s of w.sites) if (!drainedAt.has(s.id)) drainedAt.set(s.id, Date.now());
    const drainS = (performance.now() - restart) / 1000;
    const retained = await w.subscriber.retainedStatus();
    log(`drained in ${drainS.toFixed(1)} s; signed pings`);
    const pings = await pingAll(w);
    const after = await measurePhase(w, o.afterS * 1000, null);
    const seenStatus = sub.status.slice(statusBefore);
    const alive = w.sites.filter((s) => s.daemon.alive()).length;
    await w.stopGateways();
    const truth = compare(w, outageWall, restartWall);
    const connects = w.sites.map((s) =>
      s.daemon.lines.filter((l) => l.msg === "fleet broker connected" && Date.parse(String(l.time)) >= restartWall),
    );
    const bucketS = o.outageS >= 60 ? 10 : o.outageS >= 30 ? 5 : 2;
    const attemptsPerS = perBucket(counter.at, outageStart, outageEnd, bucketS * 1000).map((c) => c / bucketS);
    const firstConnect = connects.map((c) => (c.length ? Date.parse(String(c[0].time)) : NaN));
    return {
      opts: o,
      host: w.host,
      rss: { before: before.rss, during: during.rss, after: after.rss },
      cpu: { before: before.cpu, during: during.cpu, after: after.cpu },
      rssDrift: {
        during: during.rss.map((r, i) => Math.abs(r - before.rss[i])),
        after: after.rss.map((r, i) => Math.abs(r - before.rss[i])),
      },
      ...truth,
      attemptsPerS,
      bucketS,
      attempts: counter.at.length,
      retainedOnline: retained.filter((st) => st === "online").length,
      retainedOther: retained.filter((st) => st !== "online").length,
      siteDrainS: w.sites.map((s, i) => (drainedAt.get(s.id)! - firstConnect[i]) / 1000).filter(Number.isFinite),
      offline: seenStatus.filter((s) => s.state === "offline").length,
      liveStatus: seenStatus.filter((s) => !s.retain).length,
      reconnectS: connects.filter((c) => c.length).map((c) => (Date.parse(String(c[0].time)) - restartWall) / 1000),
      reconnectsPerSite: connects.map((c) => c.length),
      resumed: connects.filter((c) => c[0]?.session_resumed === true).length,
      drainS,
      alive,
      pingMs: pings.ms,
      pingNotOk: pings.notOk,
    };
  } finally {
    await w.stop();
  }
}

/** A signed ping to every site, 8 at a time; round trips in ms. */
async function pingAll(w: FleetWorld): Promise<{ ms: number[]; notOk: number }> {
  const ms: number[] = [];
  let notOk = 0;
  const queue = [...w.sites];
  const worker = async () => {
    for (let s = queue.shift(); s; s = queue.shift()) {
      // A gateway that does not answer is a figure, not the end of the run.
      const r = await w.subscriber.signedPing(s.id, w.commandKey).catch(() => null);
      if (r) ms.push(r.ms);
      if (r?.status !== 200) notOk++;
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
  return { ms, notOk };
}

/** What each gateway stored (its telemetry.db, the daemon stopped) against what the subscriber received. */
function compare(w: FleetWorld, outageWall: number, restartWall: number) {
  let snapshots = 0;
  let stored = 0;
  let lost = 0;
  let duplicated = 0;
  let redelivered = 0;
  let outOfOrder = 0;
  let backlog = 0;
  const badSites: string[] = [];
  for (const s of w.sites) {
    const got = w.subscriber.telemetry.get(s.id) ?? [];
    snapshots += got.length;
    const seen = new Set<number>();
    let dup = 0;
    let max = -Infinity;
    const dupAt: string[] = [];
    const again = w.subscriber.redelivered.get(s.id);
    for (const ts of got) {
      if (seen.has(ts)) {
        if (again?.has(ts)) redelivered++;
        else dup++;
        dupAt.push(`${((ts - outageWall) / 1000).toFixed(1)} s${again?.has(ts) ? " (redelivered to the subscriber)" : ""}`);
      } else if (ts < max) outOfOrder++;
      seen.add(ts);
      max = Math.max(max, ts);
      if (ts >= outageWall && ts < restartWall) backlog++;
    }
    // The window: the site's first message to its last (what it sent before it stopped).
    const first = got.length ? Math.min(...got) : Infinity;
    const rows = readTelemetry(join(s.dir, "data"), (db) =>
      db.prepare("SELECT ts FROM tm_snapshot WHERE n > 0 AND ts >= ? AND ts <= ? ORDER BY id").pluck().all(first, max),
    ) as number[];
    const missing = rows.filter((ts) => !seen.has(ts));
    const miss = missing.length;
    stored += rows.length;
    lost += miss;
    duplicated += dup;
    // When, from the outage's start: a loss at the instant of a broker crash is a message the broker acknowledged and had not saved.
    const at = (ts: number) => `${((ts - outageWall) / 1000).toFixed(1)} s`;
    if (miss || dupAt.length)
      badSites.push(
        `${s.id}: ${miss} lost${miss ? ` (${missing.slice(0, 5).map(at).join(", ")})` : ""}, twice: ${dupAt.join(", ") || "none"} from the outage's start`,
      );
  }
  return { snapshots, stored, lost, duplicated, redelivered, outOfOrder, backlog, badSites };
}

const f1 = (x: number) => (Number.isFinite(x) ? x.toFixed(1) : "-");
const f2 = (x: number) => (Number.isFinite(x) ? x.toFixed(2) : "-");
const spread = (all: number[], f = f1) => {
  const xs = all.filter(Number.isFinite);
  return `median ${f(median(xs))}, p90 ${f(pct(xs, 0.9))}, min ${f(Math.min(...xs))}, max ${f(Math.max(...xs))}`;
};

export function printout(r: FleetScaleResult): string {
  const o = r.opts;
  const n = o.gateways;
  const out: string[] = [];
  out.push(
    `fleet-scale: ${n} gateways (sitegate run, the unit's node flags), ${DEVICES_PER_GATEWAY} simulated devices each polled every 1 s, mqtts://${r.host} with ca_file and signed commands, one mosquitto (persistence on); outage ${o.outageS} s (${o.brokerStop ?? "SIGTERM"}), will_delay_s ${o.willDelayS ?? 60}`,
  );
  out.push(`private RSS per gateway (MiB; RssAnon):`);
  for (const p of PHASES) out.push(`  ${p.padEnd(6)} ${spread(r.rss[p])}`);
  out.push(
    `  drift against before: during max ${f1(Math.max(...r.rssDrift.during))} (median ${f1(median(r.rssDrift.during))}), after max ${f1(Math.max(...r.rssDrift.after))} (median ${f1(median(r.rssDrift.after))}); target: within 10 MiB`,
  );
  out.push(`CPU per gateway (% of one core):`);
  for (const p of PHASES) out.push(`  ${p.padEnd(6)} ${spread(r.cpu[p], f2)}; all gateways ${f1(r.cpu[p].reduce((a, b) => a + b, 0))} %`);
  out.push(
    `snapshots received ${r.snapshots.toLocaleString("en-US")} (stored by the gateways in the same span ${r.stored.toLocaleString("en-US")}): ${r.lost} lost, ${r.duplicated} duplicated (${r.redelivered} more redelivered to the subscriber on its own session), ${r.outOfOrder} out of order${r.badSites.length ? `; ${r.badSites.slice(0, 10).join("; ")}` : ""}`,
  );
  out.push(
    `backlog (snapshots taken during the outage) ${r.backlog.toLocaleString("en-US")}; every gateway drained ${f1(r.drainS)} s after the restart; per gateway, from its reconnect to its backlog delivered (s): ${spread(r.siteDrainS)}`,
  );
  out.push(
    `connection attempts during the outage: ${r.attempts} (${f2(r.attempts / n)} per gateway); per second, by ${r.bucketS} s: ${r.attemptsPerS.map(f1).join(" ")}`,
  );
  out.push(
    `reconnect after the restart (s): ${spread(r.reconnectS)}; ${r.reconnectS.length} of ${n} reconnected, connections per gateway ${Math.min(...r.reconnectsPerSite)}-${Math.max(...r.reconnectsPerSite)}, session resumed ${r.resumed}`,
  );
  out.push(
    `status messages from the outage to the stop: ${r.offline} offline${o.brokerStop === "SIGKILL" ? "" : " (mosquitto publishes every Last Will as it stops, Will Delay notwithstanding)"}, ${r.liveStatus} live in all; retained status after the drain: ${r.retainedOnline} of ${n} online, ${r.retainedOther} other`,
  );
  out.push(`signed ping round trip after the restart (ms): ${spread(r.pingMs, (x) => x.toFixed(0))}; ${r.pingNotOk} not answered 200`);
  out.push(`gateways running at the end: ${r.alive} of ${n}`);
  return out.join("\n");
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const env = (k: string, d: number) => Number(process.env[k] ?? d);
  const opts: FleetScaleOpts = {
    gateways: env("FLEET_GATEWAYS", 50),
    outageS: env("FLEET_OUTAGE_S", 30),
    warmS: env("FLEET_WARM_S", 10),
    steadyS: env("FLEET_STEADY_S", 30),
    afterS: env("FLEET_AFTER_S", 30),
    brokerStop: process.env.FLEET_BROKER_STOP === "SIGKILL" ? "SIGKILL" : "SIGTERM",
    willDelayS: env("FLEET_WILL_DELAY_S", 60),
  };
  const { dir, cleanup } = makeTmpDir();
  const t0 = performance.now();
  const log = (m: string) => process.stderr.write(`[${((performance.now() - t0) / 1000).toFixed(0)} s] ${m}\n`);
  runFleetScale(dir, opts, log).then(
    (r) => {
      process.stdout.write(printout(r) + "\n");
      cleanup();
    },
    (e: Error) => {
      process.stderr.write(`fleet-scale failed: ${e.stack ?? String(e)}\n`);
      cleanup();
      process.exit(1);
    },
  );
}
