// `make powercut`: POWERCUT_CUTS power cuts (default 100) of a `sitegate run` whose data_dir
// is on the power-cut filesystem (test/support/powercut-fs.py), against the real simulator
// and a partner sink, each at a random moment while it polls, pushes, runs dispatch events
// and answers /dr receipts, configure calls and `sitegate token revoke`. A cut kills every
// gateway process at once and drops every write not fsynced; then the databases must pass
// integrity_check, every acknowledged receipt, configuration and revocation must be there,
// every snapshot the partner received (pushed only after its commit) must be on the disk
// (the span lost before the cut is measured and printed), and the restarted daemon
// must leave no device driven; at the end every acknowledged event has exactly one
// execution. One summary row; exit 1 on any finding. POWERCUT_SEED repeats a run's moments.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { DB_FILE, TELEMETRY_DB_FILE } from "../../src/storage/db.js";
import { CLI } from "../support/site50.js";
import { mulberry32 } from "../support/seeded.js";
import { spawnDaemon, type DaemonProcess } from "../support/daemon-process.js";
import { event, rigConfig, siteScenario, startSink, POLL_MS } from "../support/dispatch.js";
import type { PartnerSink } from "../support/partner-sink.js";
import { configurePath, httpsCall, partnerToken, tcpDevice, type CallOptions } from "../support/gateway.js";
import { TEST_API_KEY } from "../support/config.js";
import { withSite, type SimHandle } from "../support/site.js";
import { until } from "../support/wait.js";
import type { MqttClient } from "mqtt";
import { signCommand } from "../../src/fleet/signing.js";
import { fleetClient, fleetConfig, startBroker } from "../support/mosquitto.js";
import { updateCuts, type UpdateCuts } from "./update-cuts.js";
import { mountPowercut, powercutUnavailable, type CutStats } from "../support/powercut-mount.js";

const CUTS = Number(process.env.POWERCUT_CUTS ?? 100);
const SEED = Number(process.env.POWERCUT_SEED ?? Math.floor(Math.random() * 2 ** 31));
const COMMIT_MS = 1000;
/** A cut lands this long after the daemon answers, at the most (a random moment in between). */
const MAX_RUN_MS = 3500;
const CONFIG_DEVICES = ["cfg-a", "cfg-b"];
/** Every fourth cut lands in an `update apply` instead of the running daemon. */
const UPDATE_EVERY = 4;

/** The same seed gives the same cut moments and workload. */
const random = mulberry32(SEED);
const between = (lo: number, hi: number) => lo + Math.floor(random() * (hi - lo));

/** What the gateway acknowledged, across every cut of the run. */
interface Acked {
  receipts: Map<string, { end: number }>;
  /** Per configured device: every name sent, in order, and the index of the last one acknowledged. */
  configs: Map<string, { names: string[]; acked: number }>;
  configureCalls: number;
  /** How many operations were acknowledged in all. */
  count: number;
  /** Fleet command nonces the gateway answered, with when: each must stay claimed until it expires. */
  nonces: Map<string, number>;
  /** Tokens whose revocation was acknowledged and not yet checked after a cut. */
  revoked: string[];
  /** The newest telemetry sample found on the disk after a cut. */
  telemetryTs: number;
  /** The end of the last event sent (acknowledged or not). */
  lastEnd: number;
}

interface Findings {
  /** Acknowledged operations, and checks of them (each is checked after every later cut). */
  acked: number;
  checks: number;
  lost: string[];
  /** Cuts whose newest durable sample was older than commit_interval_s and a poll (measured, not a finding). */
  overWindow: number;
  duplicated: string[];
  broken: string[];
  worstTelemetryMs: number;
  dropped: CutStats;
}

/** The API and the token endpoint, each request given up after 10 s (a cut may land in it). */
const call = (url: string, method: string, path: string, opts: Omit<CallOptions, "timeoutMs">) =>
  httpsCall(url, method, path, { ...opts, timeoutMs: 10_000 });
const token = (url: string) => partnerToken(url, 10_000);

/** One running gateway and the workload against it until `cut` is set. */
interface Run {
  url: string;
  daemon: DaemonProcess;
  clis: Set<ChildProcess>;
  cut: boolean;
}

/** /dr receipts: back-to-back short battery events that never overlap. */
async function dispatchLoop(run: Run, acked: Acked): Promise<void> {
  while (!run.cut) {
    const start = Math.max(Date.now() + between(300, 900), acked.lastEnd + 200);
    if (start - Date.now() > 1500) {
      await new Promise((r) => setTimeout(r, 100)); // wait: the next event must not overlap the last one
      continue;
    }
    const ev = event(
      { event_type: random() < 0.5 ? "discharge" : "charge", event_quantity: 1, event_unit: "kW" },
      start - Date.now(),
      between(500, 1200),
    );
    acked.lastEnd = Date.parse(ev.end_time);
    const r = await call(run.url, "POST", "/v1/api/gateway/site-001/dr", {
      body: { mode: "live", event_slots: [ev] },
      headers: { "x-api-key": TEST_API_KEY },
    }).catch(() => null);
    if (r?.status === 200) {
      acked.receipts.set(ev.event_id, { end: acked.lastEnd });
      acked.count++;
    }
  }
}

/** Configure calls: each renames one of two devices (on the grid meter) to a fresh name. */
async function configureLoop(run: Run, acked: Acked, port: number): Promise<void> {
  let bearer: string | null = null;
  while (!run.cut) {
    bearer ??= await token(run.url).catch(() => null);
    if (!bearer) continue;
    const n = acked.configureCalls++;
    const id = CONFIG_DEVICES[n % CONFIG_DEVICES.length];
    const name = `${id}-${SEED}-${n}`;
    const entry = acked.configs.get(id) ?? { names: [], acked: -1 };
    acked.configs.set(id, entry);
    entry.names.push(name);
    const sent = entry.names.length - 1;
    const r = await call(run.url, "PUT", configurePath(), {
      headers: { authorization: `Bearer ${bearer}` },
      body: { devices: [tcpDevice(id, port, 11, "sunspec", { mb_device_type: 1, device_name: name })] },
    }).catch(() => null);
    if (r?.status === 401) bearer = null;
    if (r?.status === 200 && r.json.devices[0].status === "accepted") {
      entry.acked = Math.max(entry.acked, sent);
      acked.count++;
    }
    await new Promise((res) => setTimeout(res, between(0, 300))); // wait: a random gap, so that cuts find calls at every stage
  }
}

/** `sitegate token revoke --all` while the daemon runs: the tokens issued before it must stay dead. */
async function revokeLoop(run: Run, acked: Acked, configFile: string): Promise<void> {
  while (!run.cut) {
    const t = await token(run.url).catch(() => null);
    if (!t || run.cut) continue;
    const child = spawn(process.execPath, [CLI, "token", "revoke", "--all", "--config", configFile, "--json"], { stdio: "ignore" });
    run.clis.add(child);
    const code = await new Promise<number | null>((r) => child.once("exit", (c) => r(c)));
    run.clis.delete(child);
    if (code === 0) {
      acked.revoked.push(t);
      acked.count++;
    }
  }
}

/** The fleet side: an MQTT client, the command key, and the reply topic it listens on. */
interface FleetSide {
  client: MqttClient;
  priv: string;
  pub: string;
  replies: Map<string, (status: number) => void>;
}

async function fleetSide(broker: Parameters<typeof fleetClient>[0]): Promise<FleetSide> {
  const k = generateKeyPairSync("ed25519");
  const client = await fleetClient(broker);
  const replies = new Map<string, (status: number) => void>();
  await client.subscribeAsync("sitegate/site-001/reply/#", { qos: 1 });
  client.on("message", (_topic, buf, packet) => {
    const corr = packet.properties?.correlationData?.toString();
    const done = corr ? replies.get(corr) : undefined;
    if (!done) return;
    replies.delete(corr!);
    done((JSON.parse(buf.toString()) as { status: number }).status);
  });
  return {
    client,
    priv: k.privateKey.export({ type: "pkcs8", format: "pem" }) as string,
    pub: k.publicKey.export({ type: "spki", format: "pem" }) as string,
    replies,
  };
}

/** Signed fleet pings: each answered one has claimed its nonce, which a replay must find. */
async function fleetLoop(run: Run, acked: Acked, fleet: FleetSide): Promise<void> {
  while (!run.cut) {
    const nonce = randomBytes(16).toString("base64url");
    const corr = randomBytes(8).toString("hex");
    const userProperties = signCommand(fleet.priv, { site: "site-001", name: "ping", body: Buffer.alloc(0), nonce });
    const status = await new Promise<number>((resolve) => {
      const timer = setTimeout(() => {
        fleet.replies.delete(corr);
        resolve(0);
      }, 1000);
      fleet.replies.set(corr, (st) => {
        clearTimeout(timer);
        resolve(st);
      });
      fleet.client.publish("sitegate/site-001/cmd/ping", Buffer.alloc(0), {
        qos: 1,
        properties: {
          responseTopic: `sitegate/site-001/reply/${fleet.client.options.clientId}`,
          correlationData: Buffer.from(corr),
          userProperties,
        },
      });
    });
    if (status === 200) {
      acked.nonces.set(nonce, Date.now());
      acked.count++;
    }
    await new Promise((r) => setTimeout(r, between(50, 300))); // wait: a random gap between fleet commands
  }
}

/** A copy of one database (file and -wal; a -shm is rebuilt), opened read-write so SQLite recovers it. */
function openCopy(backing: string, file: string, checkDir: string): Database.Database | null {
  if (!existsSync(join(backing, file))) return null;
  rmSync(checkDir, { recursive: true, force: true });
  mkdirSync(checkDir, { recursive: true });
  for (const f of [file, `${file}-wal`]) if (existsSync(join(backing, f))) copyFileSync(join(backing, f), join(checkDir, f));
  return new Database(join(checkDir, file));
}

/** The checks on the disk as the cut left it. */
function checkDisk(
  backing: string,
  work: string,
  acked: Acked,
  f: Findings,
  at: { cutAt: number; upAt: number; pushedTs: number },
  cut: number,
): number {
  const { cutAt, upAt } = at;
  let telemetryMs = cutAt - upAt;
  for (const file of [DB_FILE, TELEMETRY_DB_FILE]) {
    const db = openCopy(backing, file, join(work, "check"));
    if (!db) {
      if (acked.receipts.size || [...acked.configs.values()].some((c) => c.acked >= 0)) f.lost.push(`cut ${cut + 1}: ${file} is gone`);
      continue;
    }
    try {
      const ok = db.pragma("integrity_check", { simple: true });
      if (ok !== "ok") f.broken.push(`cut ${cut + 1}: ${file}: ${String(ok)}`);
      if (file === DB_FILE) checkMain(db, acked, f, cut);
      else telemetryMs = checkTelemetry(db, acked, f, at, cut);
    } catch (e) {
      f.broken.push(`cut ${cut + 1}: ${file}: ${(e as Error).message}`);
    } finally {
      db.close();
    }
  }
  return Math.max(0, telemetryMs);
}

/** The newest snapshot time the partner received a data push of before `cutAt` (0: none). */
function newestPushed(sink: PartnerSink, cutAt: number): number {
  let newest = 0;
  for (const r of sink.requests)
    if (r.path.endsWith("/telemetry") && r.at < cutAt && typeof r.body?.timestamp === "string")
      newest = Math.max(newest, Date.parse(r.body.timestamp as string));
  return newest;
}

/**
 * Samples the partner received before the cut must be on the disk: at `commit_interval_s: 1`
 * a snapshot is pushed only after its commit (and its WAL's sync) returned, so one that is
 * missing was acknowledged as committed and lost. Samples that an earlier cut found must
 * still be there. Returns the span before the cut that no durable sample covers, from the
 * daemon's start on: a measurement, not a finding (it also holds any time the daemon, on a
 * loaded machine, took no sample at all).
 */
function checkTelemetry(
  db: Database.Database,
  acked: Acked,
  f: Findings,
  at: { cutAt: number; upAt: number; pushedTs: number },
  cut: number,
): number {
  const table = db.prepare("SELECT 1 FROM sqlite_master WHERE name = 'tm_snapshot'").get() !== undefined;
  const last = table ? (db.prepare("SELECT max(ts) FROM tm_snapshot").pluck().get() as number | null) : null;
  if ((last ?? 0) < acked.telemetryTs)
    f.lost.push(`cut ${cut + 1}: telemetry found after an earlier cut is gone (newest sample now ${last ?? "none"})`);
  if ((last ?? 0) < at.pushedTs)
    f.lost.push(
      `cut ${cut + 1}: the partner received the snapshot of ${new Date(at.pushedTs).toISOString()} before the cut (pushed after its commit), ` +
        `the disk's newest is ${last === null ? "none" : new Date(last).toISOString()}`,
    );
  acked.telemetryTs = Math.max(acked.telemetryTs, last ?? 0);
  return at.cutAt - Math.max(last ?? 0, at.upAt);
}

function checkMain(db: Database.Database, acked: Acked, f: Findings, cut: number): void {
  const hasTable = (t: string) => db.prepare("SELECT 1 FROM sqlite_master WHERE name = ?").get(t) !== undefined;
  const events = new Set(hasTable("dp_event") ? (db.prepare("SELECT event_id FROM dp_event").pluck().all() as string[]) : []);
  for (const id of acked.receipts.keys()) {
    f.checks++;
    if (!events.has(id)) {
      // Reported once: a lost receipt stays lost.
      f.lost.push(`cut ${cut + 1}: receipt of event ${id}`);
      acked.receipts.delete(id);
    }
  }
  const configs = new Map(
    hasTable("dv_device")
      ? (db.prepare("SELECT device_id, config FROM dv_device").all() as Array<{ device_id: string; config: string }>).map((r) => [
          r.device_id,
          JSON.parse(r.config).device_name as string,
        ])
      : [],
  );
  const nonces = new Set(hasTable("fl_nonce") ? (db.prepare("SELECT nonce FROM fl_nonce").pluck().all() as string[]) : []);
  for (const [nonce, at] of acked.nonces) {
    // Pruned legitimately once the command is stale (fleet.command_max_age_s, 300 s).
    if (Date.now() - at > 250_000) continue;
    f.checks++;
    if (!nonces.has(nonce)) {
      f.lost.push(`cut ${cut + 1}: fleet nonce ${nonce}`);
      acked.nonces.delete(nonce);
    }
  }
  for (const [id, c] of acked.configs) {
    if (c.acked < 0) continue;
    f.checks++;
    const stored = configs.get(id);
    const at = stored === undefined ? -1 : c.names.indexOf(stored);
    if (at < c.acked) {
      f.lost.push(`cut ${cut + 1}: configure of ${id} as ${c.names[c.acked]} (found ${stored ?? "nothing"})`);
      c.acked = at;
    }
  }
}

/** After a restart: revoked tokens are refused, and no device stays driven once no event runs. */
async function checkRestarted(run: Run, site: SimHandle, acked: Acked, f: Findings, cut: number): Promise<void> {
  for (const t of acked.revoked.splice(0)) {
    f.checks++;
    // The guard answers before the body is read: 401 for a dead token, 400 for a live one.
    const r = await call(run.url, "PUT", configurePath(), { headers: { authorization: `Bearer ${t}` }, body: {} });
    if (r.status !== 401) f.lost.push(`cut ${cut + 1}: a revoked token answered ${r.status}`);
  }
  await until(() => Date.now() > acked.lastEnd + POLL_MS, "the last event's end", 10_000);
  const battery = () => site.state().devices.battery.power_w as number;
  // Released at an event's end within a poll or two; a few polls is the bound, not a measurement.
  await until(() => battery() === 0, "battery released", 8 * POLL_MS).catch(() =>
    f.lost.push(`cut ${cut + 1}: battery left driven at ${battery()} W after the restart`),
  );
}

async function waitUp(url: string): Promise<void> {
  await until(
    async () =>
      (
        await call(url, "POST", "/v1/api/gateway/site-001/dr", {
          body: { mode: "live", event_slots: [] },
          headers: { "x-api-key": TEST_API_KEY },
        }).catch(() => ({ status: 0 }))
      ).status === 400,
    "daemon answers",
    45_000,
  );
}

/** Every acknowledged event reported exactly once (resends of one execution keep its Idempotency-Key). */
async function checkExecutions(sink: PartnerSink, acked: Acked, f: Findings): Promise<number> {
  const keysOf = (id: string) =>
    new Set(
      sink
        .accepted("/exec")
        .filter((r) => r.body?.event_id === id)
        .map((r) => String(r.headers["idempotency-key"])),
    );
  await until(() => [...acked.receipts.keys()].every((id) => keysOf(id).size > 0), "every acknowledged event reported", 30_000).catch(
    () => {},
  );
  let resent = 0;
  for (const id of acked.receipts.keys()) {
    f.checks++;
    const keys = keysOf(id);
    if (keys.size === 0) f.lost.push(`event ${id}: no execution response`);
    if (keys.size > 1) f.duplicated.push(`event ${id}: ${keys.size} executions`);
    resent += sink.accepted("/exec").filter((r) => r.body?.event_id === id).length - keys.size;
  }
  return resent;
}

async function cycle(
  ctx: {
    work: string;
    backing: string;
    mnt: string;
    site: SimHandle;
    sink: PartnerSink;
    acked: Acked;
    f: Findings;
    config: Record<string, unknown>;
    fleet: FleetSide;
  },
  cut: number,
): Promise<boolean> {
  const { work, backing, mnt, site, acked, f } = ctx;
  const mount = await mountPowercut(backing, mnt, work);
  const daemon = await spawnDaemon(work, ctx.config).catch((e: Error) => {
    f.broken.push(`cut ${cut + 1}: the daemon did not start: ${e.message}`);
    return null;
  });
  if (!daemon) {
    await mount.cut();
    return false;
  }
  const run: Run = { url: daemon.url, daemon, clis: new Set(), cut: false };
  await waitUp(run.url);
  const upAt = Date.now();
  await checkRestarted(run, site, acked, f, cut);
  const loops = [
    dispatchLoop(run, acked),
    configureLoop(run, acked, site.tcpPorts[0]),
    revokeLoop(run, acked, daemon.configFile),
    fleetLoop(run, acked, ctx.fleet),
  ];
  await new Promise((r) => setTimeout(r, between(200, MAX_RUN_MS))); // wait: the cut's random moment
  // The cut: every gateway process at once, then the disk loses what was not synced.
  run.cut = true;
  const cutAt = Date.now();
  for (const p of [daemon.child, ...run.clis]) p.kill("SIGKILL");
  const dead = (p: ChildProcess) =>
    p.exitCode === null && p.signalCode === null ? new Promise((r) => p.once("exit", r)) : Promise.resolve();
  await Promise.all([daemon.child, ...run.clis].map(dead));
  await Promise.allSettled(loops);
  const stats = await mount.cut();
  for (const k of Object.keys(stats) as Array<keyof CutStats>) f.dropped[k] += stats[k];
  const tm = checkDisk(backing, work, acked, f, { cutAt, upAt, pushedTs: newestPushed(ctx.sink, cutAt) }, cut);
  f.worstTelemetryMs = Math.max(f.worstTelemetryMs, tm);
  if (tm > COMMIT_MS + POLL_MS) f.overWindow++;
  process.stderr.write(
    `cut ${cut + 1}/${CUTS} at ${cutAt - upAt} ms: dropped ${stats.dropped_writes} writes (${stats.dropped_bytes} B), ${stats.dropped_names} names; telemetry lost ${tm} ms; findings ${f.lost.length + f.broken.length}\n`,
  );
  return true;
}

async function updateCut(updates: UpdateCuts, f: Findings, cut: number): Promise<void> {
  const r = await updates.cut(random);
  f.acked += r.acked;
  f.checks += r.checks;
  f.lost.push(...r.lost.map((l) => `cut ${cut + 1}: ${l}`));
  f.broken.push(...r.broken.map((l) => `cut ${cut + 1}: ${l}`));
  process.stderr.write(
    `cut ${cut + 1}/${CUTS} in update apply (${r.acked ? "it had finished" : "unfinished"}): findings ${f.lost.length + f.broken.length}\n`,
  );
}

async function main(): Promise<void> {
  const why = powercutUnavailable();
  if (why) throw new Error(`cannot run the power-cut harness here: ${why}`);
  const work = mkdtempSync(join(tmpdir(), "sitegate-powercut-"));
  const sink = await startSink();
  const acked: Acked = {
    receipts: new Map(),
    configs: new Map(),
    configureCalls: 0,
    count: 0,
    nonces: new Map(),
    revoked: [],
    lastEnd: 0,
    telemetryTs: 0,
  };
  const f: Findings = {
    acked: 0,
    checks: 0,
    lost: [],
    overWindow: 0,
    duplicated: [],
    broken: [],
    worstTelemetryMs: 0,
    dropped: { ops: 0, fsyncs: 0, dropped_writes: 0, dropped_bytes: 0, dropped_names: 0 },
  };
  const started = Date.now();
  let resent = 0;
  try {
    const updates = await updateCuts(work);
    const broker = await startBroker(join(work, "broker"));
    const fleet = await fleetSide(broker);
    await withSite(siteScenario(), async (site) => {
      const mnt = join(work, "mnt");
      const config = {
        data_dir: mnt,
        log_level: "warn" as const,
        ...rigConfig(site, sink),
        fleet: { ...fleetConfig(broker), command_keys: [fleet.pub] },
      };
      const ctx = { work, backing: join(work, "disk"), mnt, site, sink, acked, f, config, fleet };
      for (let i = 0; i < CUTS; i++) {
        if (i % UPDATE_EVERY === UPDATE_EVERY - 1) await updateCut(updates, f, i);
        // A daemon that cannot start after a cut will not start after the next one either.
        else if (!(await cycle(ctx, i))) break;
      }
      // One more start: the last cut's restart checks, then every event's execution.
      const mount = await mountPowercut(ctx.backing, ctx.mnt, work);
      const daemon = await spawnDaemon(work, config);
      try {
        await waitUp(daemon.url);
        await checkRestarted({ url: daemon.url, daemon, clis: new Set(), cut: false }, site, acked, f, CUTS - 1);
        resent = await checkExecutions(sink, acked, f);
      } finally {
        await daemon.stop();
        await mount.cut();
      }
    });
    await fleet.client.endAsync();
    await broker.stop();
  } finally {
    await sink.stop();
    // A run that failed half-way may leave a mount behind: detach it before removing the dir.
    for (const m of ["mnt", "update-mnt"]) spawnSync("fusermount", ["-u", "-z", join(work, m)], { stdio: "ignore" });
    rmSync(work, { recursive: true, force: true });
  }
  f.acked += acked.count;
  for (const l of [...f.broken, ...f.lost, ...f.duplicated].slice(0, 60)) process.stderr.write(`FINDING ${l}\n`);
  const perCut = ((Date.now() - started) / CUTS / 1000).toFixed(1);
  process.stdout.write(
    `powercut seed=${SEED}: cuts ${CUTS}, acknowledged operations ${f.acked} (checks ${f.checks}), lost ${f.lost.length}, ` +
      `duplicated ${f.duplicated.length}, broken ${f.broken.length}, worst telemetry loss ${f.worstTelemetryMs} ms ` +
      `(window ${COMMIT_MS + POLL_MS} ms, ${f.overWindow} cuts over it), resent with the same key ${resent}, ` +
      `dropped ${f.dropped.dropped_writes} writes ${f.dropped.dropped_names} names, ${perCut} s a cut\n`,
  );
  if (f.lost.length || f.duplicated.length || f.broken.length) process.exitCode = 1;
}

main().catch((e) => {
  process.stderr.write(`powercut: ${(e as Error).stack ?? String(e)}\n`);
  process.exit(1);
});
