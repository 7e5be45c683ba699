// Dispatch figures against references measured in the same run:
// - /dr requests/s for 10-event requests (new event_ids, starts in the future; once 2,000
//   are out, every other request cancels the 10 oldest, so the daemon stays under its bound
//   of 10,000 events not yet ended across the rounds), keep-alive
//   HTTPS with 4 concurrent clients, from `sitegate run` under the unit's node flags against
//   a bare fastify HTTPS route under the same flags, with the same TLS, allowlist and
//   X-API-Key hook (references.ts), that parses the same body, commits one SQLite
//   transaction (synchronous=FULL) and answers the same 10 receipts (no validation of the
//   events); the flags' own cost is that route with and without them;
// - event start lateness, start_time to the first write the simulator receives for the
//   event, over 200 short discharge events (30 with BENCH_QUICK=1), against a bare
//   setTimeout + modbus-serial write to the same simulator on the same kind of schedule;
// - setpoint-to-delivery: start_time to the first reading the gateway has in which the
//   battery's power is within 5% of the setpoint (the confirmation read dispatch makes in
//   the control lane after the write, or a poll snapshot, whichever comes first), against
//   the time the simulator's own power_w gets there (it follows a write at once).
// The simulator runs in this process: its writes and the gateway's snapshots are stamped
// by one clock, to the sub-millisecond.
import { randomUUID } from "node:crypto";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import ModbusRTU from "modbus-serial";
import { httpsLoad } from "./https-load.js";
import type { BenchFn, BenchRow } from "./types.js";
import { startSim } from "../../hw-sim/sim.js";
import type { Dispatcher } from "../../src/dispatch/dispatcher.js";
import type { Snapshot } from "../../src/telemetry/types.js";
import type { DeviceRegistry } from "../../src/modbus/device/registry.js";
import type { ModbusPolling } from "../../src/modbus/device/polling.js";
import { startGateway } from "../support/gateway.js";
import { spawnDaemon as spawnDaemonProcess } from "../support/daemon-process.js";
import { TEST_API_KEY, testConfigInput } from "../support/config.js";
import { flagSets, flagsLabel, inChild } from "./in-child.js";
import { testCert } from "../support/tls.js";
import { POLL_MS, rigConfig, siteScenario, waitPaired } from "../support/dispatch.js";
import { startSink } from "../support/partner-sink.js";

const SITE = "site-001";
const DR_PATH = `/v1/api/gateway/${SITE}/dr`;
const REFERENCES = new URL("./references.js", import.meta.url).href;

function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Wall-clock ms with sub-millisecond resolution: performance.now() aligned once to a
 * Date.now() tick (what the scheduler compares start_time with).
 */
function wallClock(): () => number {
  const d0 = Date.now();
  let d = d0;
  while ((d = Date.now()) === d0);
  const off = d - performance.now();
  return () => performance.now() + off;
}

/** `n` new events, each starting 1-2 h from now (never runs during the bench). */
function drSlots(n: number): Array<Record<string, unknown>> {
  const now = Date.now();
  return Array.from({ length: n }, (_, i) => {
    const start = now + 3_600_000 + Math.floor(Math.random() * 3_600_000) + i;
    return {
      event_id: randomUUID(),
      start_time: new Date(start).toISOString(),
      end_time: new Date(start + 900_000).toISOString(),
      event_type: i % 2 ? "charge" : "discharge",
      event_quantity: 2.5,
      event_unit: "kW",
      priority: 10 + i,
      mandatory: false,
      cancelled: false,
    };
  });
}

/** Events a target was sent and not yet cancelled, per target URL (kept across the rounds). */
const sentTo = new Map<string, Array<Array<Record<string, unknown>>>>();
const KEEP_OPEN = 2000;

/** The next /dr body for `url`: 10 new events, or, every other time once KEEP_OPEN are out, the cancellation of the 10 oldest. */
function drBody(url: string): string {
  const sent = sentTo.get(url) ?? [];
  sentTo.set(url, sent);
  const cancel = sent.length * 10 >= KEEP_OPEN && sent.length % 2 === 0;
  const slots = cancel ? sent.shift()!.map((e) => ({ ...e, cancelled: true })) : drSlots(10);
  if (!cancel) sent.push(slots);
  return JSON.stringify({ mode: "live", event_slots: slots });
}

/** Requests/s of POST `url` with fresh 10-event bodies, 4 requests in flight; every answer is 10 accepted receipts. */
function hammerDr(url: string, headers: Record<string, string>, ms: number): Promise<number> {
  return httpsLoad(url, {
    ms,
    headers,
    method: "POST",
    body: () => drBody(url),
    check(status, text) {
      if (status !== 200) throw new Error(`HTTP ${status}: ${text.slice(0, 300)}`);
      const receipts = JSON.parse(text) as Array<{ status: string }>;
      const all = (st: string) => receipts.every((x) => x.status === st);
      if (receipts.length !== 10 || !(all("accepted") || all("cancelled"))) throw new Error(`unexpected receipts: ${text.slice(0, 300)}`);
    },
  });
}

async function drThroughput(ctx: Parameters<BenchFn>[0]): Promise<BenchRow[]> {
  const ms = ctx.quick ? 1000 : 5000;
  const cert = testCert();
  const { unit, plain } = flagSets();
  // BENCH_DR_PROF=DIR: the daemon writes a V8 CPU profile there (to find where /dr spends).
  const prof = process.env.BENCH_DR_PROF ? ["--cpu-prof", `--cpu-prof-dir=${process.env.BENCH_DR_PROF}`] : [];
  // The daemon as the unit starts it (its node flags), the reference in a child under the
  // same flags, and the same reference with no flags (what the flags cost on their own).
  mkdirSync(join(ctx.dir, "dr"));
  const gw = await spawnDaemonProcess(
    join(ctx.dir, "dr"),
    {
      log_level: "warn",
      http: { listen: "127.0.0.1:0", tls: { cert: cert.certFile, key: cert.keyFile }, rate_limit_per_min: 100_000_000 },
    },
    { nodeArgs: [...unit.nodeArgs, ...prof] },
  );
  // The reference checks what the daemon's route checks: the config's allowlist and API key.
  const guard = { allowlist: testConfigInput(ctx.dir).auth.ip_allowlist ?? [], apiKey: TEST_API_KEY };
  const bare = await inChild<{ port: number }>(
    REFERENCES,
    "bareDrServer",
    { dir: join(ctx.dir, "bare-flags"), path: DR_PATH, guard },
    unit,
  );
  const barePlain = await inChild<{ port: number }>(
    REFERENCES,
    "bareDrServer",
    { dir: join(ctx.dir, "bare-plain"), path: DR_PATH, guard },
    plain,
  );
  try {
    const key = { "x-api-key": TEST_API_KEY };
    const runs = {
      ours: () => hammerDr(gw.url + DR_PATH, key, ms),
      ref: () => hammerDr(`https://127.0.0.1:${bare.result.port}${DR_PATH}`, key, ms),
      refPlain: () => hammerDr(`https://127.0.0.1:${barePlain.result.port}${DR_PATH}`, key, ms),
    };
    // Warm each up, then alternate and keep each one's best round: the order must not decide.
    const best = { ours: 0, ref: 0, refPlain: 0 };
    const rounds: string[] = [];
    for (const run of Object.values(runs)) await run();
    for (let i = 0; i < (ctx.quick ? 2 : 3); i++) {
      const got = { ours: await runs.ours(), ref: await runs.ref(), refPlain: await runs.refPlain() };
      rounds.push(`${got.ours.toFixed(0)}/${got.ref.toFixed(0)}/${got.refPlain.toFixed(0)}`);
      for (const k of Object.keys(best) as Array<keyof typeof best>) best[k] = Math.max(best[k], got[k]);
    }
    ctx.log(`/dr req/s ours/bare/bare without flags (${flagsLabel(unit.nodeArgs)}): rounds ${rounds.join(", ")}`);
    return [
      {
        name: "/dr throughput, 10 events/request",
        value: best.ours,
        unit: "req/s",
        reference: best.ref,
        ratio: best.ours / best.ref,
        note: "bare fastify HTTPS route, same TLS, allowlist and key hook, unit's node flags: parse, 1 SQLite tx (FULL), 10 receipts",
      },
      {
        name: "flags' own cost: bare /dr route, unit's node flags",
        value: best.ref,
        unit: "req/s",
        reference: best.refPlain,
        ratio: best.ref / best.refPlain,
        note: "the same bare route, no node flags",
      },
    ];
  } finally {
    await gw.stop();
    await bare.stop();
    await barePlain.stop();
  }
}

interface Planned {
  id: string;
  start: number;
  end: number;
  watts: number;
}

interface SimWrite {
  at: number;
  address: number;
  values: number[];
  power_w: number;
}

async function eventRun(ctx: Parameters<BenchFn>[0]): Promise<BenchRow[]> {
  const n = ctx.quick ? 30 : 200;
  const sink = await startSink();
  const site = await startSim(siteScenario());
  const wall = wallClock();
  // Every write the battery receives, with its power right after it.
  const battery = site.device("battery");
  const writes: SimWrite[] = [];
  const writeHolding = battery.writeHolding.bind(battery);
  battery.writeHolding = (address: number, values: number[]) => {
    writeHolding(address, values);
    writes.push({ at: wall(), address, values: [...values], power_w: battery.view().power_w });
  };
  try {
    const gw = await startGateway(join(ctx.dir, "events"), rigConfig(site, sink));
    // What the gateway itself has of the battery: each poll snapshot as the dispatcher
    // receives it, and each confirmation read as the latest values take it.
    const seen: Array<{ at: number; power_w: number; source: "poll" | "confirm" }> = [];
    let plan: Planned[] = [];
    try {
      await waitPaired(gw, 4).catch((e: Error) => {
        const reg = gw.daemon
          .part<DeviceRegistry>("registry")
          .list()
          .map((d) => `${d.config.device_id}:${d.fully_configured}`);
        const reqs = Object.entries(site.state().devices).map(([k, v]) => `${k}:${v.requests}`);
        throw new Error(`${e.message}; registry [${reg.join(" ")}]; simulator requests [${reqs.join(" ")}]`);
      });
      const dispatch = gw.daemon.part<Dispatcher>("dispatch");
      const observe = dispatch.observe.bind(dispatch);
      dispatch.observe = (s: Snapshot) => {
        const b = s.devices.find((d) => d.device_id === "battery")?.metrics.power_w;
        if (b !== undefined) seen.push({ at: wall(), power_w: b, source: "poll" });
        observe(s);
      };
      const poller = gw.daemon.part<ModbusPolling>("modbus-polling");
      const confirm = poller.confirm.bind(poller);
      poller.confirm = (id, metrics) => {
        confirm(id, metrics);
        const b = poller.latest(id)?.power_w;
        if (id === "battery" && metrics.power_w !== undefined && b !== undefined) seen.push({ at: wall(), power_w: b, source: "confirm" });
      };
      // Events of 350 ms (longer than a poll interval, so that a snapshot falls inside),
      // 500-560 ms apart so that starts drift across the poll phase; 2 kW and 3 kW in turn,
      // released in between.
      let t = Date.now() + 2500;
      plan = Array.from({ length: n }, (_, i) => {
        const p = { id: randomUUID(), start: t, end: t + 350, watts: i % 2 ? 3000 : 2000 };
        t += 500 + ((i * 37) % 61);
        return p;
      });
      for (let i = 0; i < plan.length; i += 100) {
        const slots = plan.slice(i, i + 100).map((p) => ({
          event_id: p.id,
          start_time: new Date(p.start).toISOString(),
          end_time: new Date(p.end).toISOString(),
          event_type: "discharge",
          event_quantity: p.watts,
          event_unit: "w",
          priority: 10,
          mandatory: false,
          cancelled: false,
        }));
        const r = await gw.call("POST", DR_PATH, { body: { mode: "live", event_slots: slots }, headers: gw.apiKeyHeaders });
        if (r.status !== 200) throw new Error(`/dr: HTTP ${r.status} ${r.text}`);
      }
      if (Date.now() >= plan[0].start) throw new Error("submitting the events took longer than the lead time");
      await sleep(plan[plan.length - 1].end - Date.now() + 1500); // wait: the benchmark runs the real-time plan to its end
      const statuses = new Map<string, number>();
      for (const r of sink.accepted("/exec")) statuses.set(r.body?.status, (statuses.get(r.body?.status) ?? 0) + 1);
      ctx.log(
        `execution responses: ${[...statuses].map(([k, v]) => `${v} ${k}`).join(", ") || "none"}; dispatcher ${JSON.stringify(dispatch.stats)}`,
      );
    } finally {
      await gw.stop();
    }

    // performance.now() against the wall clock after the run: 0..1 ms (Date.now() truncates) means no drift.
    ctx.log(`clock check after the run: aligned clock - Date.now() = ${(wall() - Date.now()).toFixed(2)} ms`);
    const late: number[] = [];
    const simAt: number[] = [];
    const deliver: number[] = [];
    const byPoll: number[] = [];
    const firstBy = { poll: 0, confirm: 0 };
    let noWrite = 0;
    let undelivered = 0;
    for (const p of plan) {
      const w = writes.find((x) => x.at >= p.start && x.at < p.end);
      if (!w) {
        noWrite++;
        continue;
      }
      late.push(w.at - p.start);
      const within = (watts: number) => Math.abs(watts - p.watts) <= 0.05 * p.watts;
      const s = writes.find((x) => x.at >= p.start && x.at < p.end && within(x.power_w));
      const g = seen.find((x) => x.at >= p.start && x.at < p.end && within(x.power_w));
      const gp = seen.find((x) => x.source === "poll" && x.at >= p.start && x.at < p.end && within(x.power_w));
      if (s && g) {
        simAt.push(s.at - p.start);
        deliver.push(g.at - p.start);
        firstBy[g.source]++;
        if (gp) byPoll.push(gp.at - p.start);
      } else undelivered++;
    }
    if (late.length === 0) throw new Error("the simulator saw no write inside any event");
    if (deliver.length === 0) throw new Error("no reading showed the battery at its setpoint inside any event");
    ctx.log(
      `lateness over ${late.length} events: p50 ${percentile(late, 50).toFixed(2)} ms, p99 ${percentile(late, 99).toFixed(2)} ms, max ${Math.max(...late).toFixed(2)} ms; ${noWrite} without a write inside the event`,
    );
    ctx.log(
      `delivery seen by the gateway (poll every ${POLL_MS} ms): p50 ${percentile(deliver, 50).toFixed(1)} ms, p99 ${percentile(deliver, 99).toFixed(1)} ms, first reading at the setpoint from ${firstBy.confirm} confirmation reads and ${firstBy.poll} polls; simulator at setpoint p50 ${percentile(simAt, 50).toFixed(2)} ms; ${undelivered} events without a reading at the setpoint before their end`,
    );
    if (byPoll.length)
      ctx.log(
        `the first poll at the setpoint alone: p50 ${percentile(byPoll, 50).toFixed(1)} ms, p99 ${percentile(byPoll, 99).toFixed(1)} ms (${byPoll.length} events)`,
      );

    // Reference for lateness: a bare timer and a modbus-serial write of the same register,
    // same number of starts, to the same simulator (no gateway running).
    const address = writes.find((x) => x.at >= plan[0].start)!.address;
    const bare = await bareTimerWrites(site.tcpPorts[0], address, n, writes);
    ctx.log(`bare timer + write: p50 ${percentile(bare, 50).toFixed(2)} ms, p99 ${percentile(bare, 99).toFixed(2)} ms`);

    const l50 = percentile(late, 50);
    const l99 = percentile(late, 99);
    const b50 = percentile(bare, 50);
    const b99 = percentile(bare, 99);
    const d50 = percentile(deliver, 50);
    const d99 = percentile(deliver, 99);
    const s50 = percentile(simAt, 50);
    const s99 = percentile(simAt, 99);
    const lateNote = "bare setTimeout + modbus-serial write; goal p99 <= 20 ms";
    const delNote = `simulator power_w at setpoint; first reading: ${firstBy.confirm} confirm, ${firstBy.poll} poll (every ${POLL_MS} ms)`;
    return [
      {
        name: `event start lateness p50 (${late.length} events)`,
        value: l50,
        unit: "ms",
        reference: b50,
        ratio: b50 / l50,
        note: lateNote,
      },
      {
        name: `event start lateness p99 (${late.length} events)`,
        value: l99,
        unit: "ms",
        reference: b99,
        ratio: b99 / l99,
        note: lateNote,
      },
      {
        name: "setpoint-to-delivery p50 (within 5%)",
        value: d50,
        unit: "ms",
        reference: s50,
        ratio: s50 / d50,
        note: `${delNote}; goal p50 <= 50 ms`,
      },
      { name: "setpoint-to-delivery p99 (within 5%)", value: d99, unit: "ms", reference: s99, ratio: s99 / d99, note: delNote },
    ];
  } finally {
    await site.stop();
    await sink.stop();
  }
}

/** Lateness of `n` plain setTimeout-driven single-register writes, as the simulator sees them. */
async function bareTimerWrites(port: number, address: number, n: number, writes: SimWrite[]): Promise<number[]> {
  const c = new ModbusRTU.default();
  await c.connectTCP("127.0.0.1", { port });
  c.setID(1);
  c.setTimeout(2000);
  const out: number[] = [];
  try {
    for (let i = 0; i < n; i++) {
      const start = Date.now() + 50 + ((i * 37) % 61);
      const from = writes.length;
      // Like the scheduler: a timer that fires before start_time (by the clock it compares
      // with) is set again.
      await new Promise<void>((resolve, reject) => {
        const fire = () => {
          if (Date.now() < start) setTimeout(fire, start - Date.now());
          else c.writeRegister(address, 60).then(() => resolve(), reject);
        };
        setTimeout(fire, start - Date.now());
      });
      const w = writes.slice(from).find((x) => x.at >= start);
      if (w) out.push(w.at - start);
    }
  } finally {
    await new Promise<void>((r) => c.close(() => r()));
  }
  return out;
}

const bench: BenchFn = async (ctx) => {
  const rows: BenchRow[] = [];
  rows.push(...(await drThroughput(ctx)));
  rows.push(...(await eventRun(ctx)));
  return rows;
};
export default bench;
