// Resident memory of `sitegate run` (the unit's node flags and environment, a real
// mosquitto with the simulator's zigbee2mqtt bridge on it) through four attacks in a row:
// 1. slow TLS clients: 1,200 clients from 20 allowlisted source addresses finish the
//    handshake and then trickle a request's headers, reconnecting whenever they are closed;
// 2. a dispatch flood: 10,000 events in 100-event POSTs to /dr, 8 at a time;
// 3. credential guessing: rounds of 40 parallel wrong passwords at /connect/token, each from
//    its own source address and for its own username, with 40 wrong API keys at /dr from 4;
// 4. a Zigbee flood on the local broker: state messages to the configured devices' topics
//    and forged bridge/devices lists near the size cap, as fast as the broker takes them.
// RSS (VmRSS; smaps_rollup's anonymous part in the log) is sampled every 250 ms throughout.
// Rows: RSS at start, the peak of each phase, the peak over all against 200 MiB, and RSS
// 60 s after the last attack against start + 30 MiB. Lower is better,
// so each ratio is bound / value: >= 1.00x passes. Memory figures are rows, never asserts.
// BENCH_ENV="K=V ..." adds to (or, with K=, clears) the unit's environment, to compare malloc settings
// (BENCH_ENV="LD_PRELOAD=" runs it on glibc's malloc, as before the unit preloaded jemalloc).
// The start line names the malloc the daemon runs on.
import { connect as netConnect } from "node:net";
import { connect as tlsConnect, type TLSSocket } from "node:tls";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Agent, request } from "undici";
import { connectAsync } from "mqtt";
import type { BenchFn, BenchRow } from "./types.js";
import { spawnDaemon } from "../support/daemon-process.js";
import { startLocalBroker } from "../support/mosquitto.js";
import { withSite } from "../support/site.js";
import { zigbeeConfig, zigbeeScenario, Z2M_BASE } from "../support/zigbee-site.js";
import { TEST_API_KEY, testConfigInput } from "../support/config.js";
import { testCert } from "../support/tls.js";
import { event } from "../support/dispatch.js";

const MiB = 1024;
const PEAK_BOUND = 200;
const RETURN_MARGIN = 30;
/** The first answer of each status, for the log. */
const samples = new Map<string, string>();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** kB of one field of /proc/PID/status or /proc/PID/smaps_rollup. */
function procKb(pid: number, file: "status" | "smaps_rollup", field: string): number {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(readFileSync(`/proc/${pid}/${file}`, "utf8"));
  return m ? Number(m[1]) : NaN;
}

/** The malloc the daemon runs on: a preloaded one (the unit's jemalloc, or BENCH_ENV's LD_PRELOAD) or glibc's. */
function allocator(pid: number): string {
  const m = /\/(lib(?:jemalloc|mimalloc|tcmalloc)[^/\s]*)$/m.exec(readFileSync(`/proc/${pid}/maps`, "utf8"));
  return m ? m[1] : "glibc malloc";
}

/** RSS every 250 ms, the peak per phase. */
class Sampler {
  readonly peaks = new Map<string, number>();
  phase = "start";
  private timer: NodeJS.Timeout;
  constructor(private readonly pid: number) {
    this.timer = setInterval(() => this.sample(), 250);
  }
  sample(): number {
    const rss = procKb(this.pid, "status", "VmRSS") / MiB;
    if (Number.isFinite(rss)) this.peaks.set(this.phase, Math.max(this.peaks.get(this.phase) ?? 0, rss));
    return rss;
  }
  detail(): string {
    const anon = procKb(this.pid, "smaps_rollup", "Anonymous") / MiB;
    const file = procKb(this.pid, "smaps_rollup", "Rss") / MiB - anon;
    return `RSS ${this.sample().toFixed(0)} MiB (anonymous ${anon.toFixed(0)}, file ${file.toFixed(0)})`;
  }
  stop(): void {
    clearInterval(this.timer);
  }
}

/** The daemon's V8 heap (used / reserved) and external memory from /metrics, for the log. */
async function heapLine(url: string): Promise<string> {
  const agent = new Agent({ connect: { ca: testCert().cert } });
  try {
    const r = await request(`${url}/metrics`, { dispatcher: agent });
    const text = await r.body.text();
    const get = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, "m").exec(text)?.[1] ?? NaN) / 2 ** 20;
    return `heap ${get("nodejs_heap_size_used_bytes").toFixed(1)}/${get("nodejs_heap_size_total_bytes").toFixed(1)} MiB, external ${get("nodejs_external_memory_bytes").toFixed(1)} MiB`;
  } catch (e) {
    return `metrics: ${(e as Error).message}`;
  } finally {
    await agent.close();
  }
}

/** Slow clients: each finishes TLS, sends a request line and a header byte every 2 s; reconnects when closed. */
async function slowClients(url: URL, n: number, sources: number, ms: number): Promise<{ opened: number; closed: number }> {
  const end = Date.now() + ms;
  let opened = 0;
  let closed = 0;
  const live = new Set<TLSSocket>();
  const one = (i: number) => {
    if (Date.now() >= end) return;
    const tcp = netConnect({ host: url.hostname, port: Number(url.port), localAddress: `127.0.0.${2 + (i % sources)}` });
    tcp.on("error", () => undefined);
    const s = tlsConnect({ socket: tcp, servername: "localhost", ca: testCert().cert });
    live.add(s);
    let drip: NodeJS.Timeout | undefined;
    s.once("secureConnect", () => {
      opened++;
      s.write(`POST /v1/api/gateway/site-001/dr HTTP/1.1\r\nHost: x\r\nx-api-key: ${TEST_API_KEY}\r\nX-`);
      drip = setInterval(() => s.write("a"), 2000);
    });
    s.on("error", () => undefined);
    s.once("close", () => {
      clearInterval(drip);
      live.delete(s);
      closed++;
      setTimeout(() => one(i), 250); // wait: a refused client comes back, but not in a busy loop
    });
  };
  for (let i = 0; i < n; i++) {
    one(i);
    if (i % 50 === 49) await sleep(50); // wait: the clients arrive in bursts, not in one tick
  }
  await sleep(Math.max(0, end - Date.now())); // wait: the attack lasts its time
  for (const s of live) s.destroy();
  return { opened, closed };
}

/** 10,000 events in 100-event POSTs, `parallel` at a time; statuses counted. */
async function drFlood(url: string, events: number, parallel: number): Promise<Map<number, number>> {
  const agent = new Agent({ connect: { ca: testCert().cert }, connections: parallel });
  const statuses = new Map<number, number>();
  let left = events / 100;
  try {
    await Promise.all(
      Array.from({ length: parallel }, async () => {
        while (left-- > 0) {
          const slots = Array.from({ length: 100 }, () => event({}, 3600_000 + Math.random() * 3600_000, 3600_000));
          const body = JSON.stringify({ mode: "live", event_slots: slots });
          const r = await request(`${url}/v1/api/gateway/site-001/dr`, {
            method: "POST",
            body,
            headers: { "content-type": "application/json", "x-api-key": TEST_API_KEY },
            dispatcher: agent,
          });
          const text = await r.body.text();
          if (!statuses.has(r.statusCode)) samples.set(`dr ${r.statusCode}`, text.slice(0, 300));
          statuses.set(r.statusCode, (statuses.get(r.statusCode) ?? 0) + 1);
        }
      }),
    );
  } finally {
    await agent.close();
  }
  return statuses;
}

/**
 * Rounds of `parallel` wrong passwords at /connect/token, each from its own source address
 * and for its own username, and as many wrong API keys at /dr from 4 source addresses;
 * answers counted by endpoint and status.
 */
async function guesses(url: string, parallel: number, rounds: number): Promise<Map<string, number>> {
  const statuses = new Map<string, number>();
  const count = (what: string, status: number | string, text: string) => {
    const k = `${what} ${status}`;
    if (!statuses.has(k)) samples.set(k, text.slice(0, 300));
    statuses.set(k, (statuses.get(k) ?? 0) + 1);
  };
  // A connection the daemon closes (a request over its 30 s on a loaded machine) is counted, not the end of the bench.
  const closed = (what: string) => (e: unknown) => count(what, (e as { code?: string }).code ?? "error", String(e));
  const agent = (addr: string) => new Agent({ connect: { ca: testCert().cert }, localAddress: addr });
  const tokenAgents = Array.from({ length: parallel }, (_, i) => agent(`127.0.1.${2 + i}`));
  const keyAgents = Array.from({ length: 4 }, (_, i) => agent(`127.0.2.${2 + i}`));
  try {
    for (let r = 0; r < rounds; r++) {
      const token = tokenAgents
        .map(async (dispatcher, i) => {
          const form = { grant_type: "password", client_id: "partner-portal", username: `user-${r}-${i}`, password: `guess-${r}-${i}` };
          const res = await request(`${url}/connect/token`, {
            method: "POST",
            body: new URLSearchParams(form).toString(),
            headers: { "content-type": "application/x-www-form-urlencoded" },
            dispatcher,
          });
          count("token", res.statusCode, await res.body.text());
        })
        .map((p) => p.catch(closed("token")));
      const keys = Array.from({ length: parallel }, async (_, i) => {
        const res = await request(`${url}/v1/api/gateway/site-001/dr`, {
          method: "POST",
          body: "{}",
          headers: { "content-type": "application/json", "x-api-key": `guess-${r}-${i}` },
          dispatcher: keyAgents[i % keyAgents.length],
        });
        count("key", res.statusCode, await res.body.text());
      }).map((p) => p.catch(closed("key")));
      await Promise.all([...token, ...keys]);
    }
  } finally {
    await Promise.all([...tokenAgents, ...keyAgents].map((a) => a.close()));
  }
  return statuses;
}

/** State messages to the configured devices' topics and forged device lists near the 1 MiB cap, for `ms`. */
async function zigbeeFlood(brokerUrl: string, ms: number): Promise<{ states: number; lists: number }> {
  const c = await connectAsync(brokerUrl, { clientId: `hostile-${process.pid}` });
  const base = Z2M_BASE;
  const names = ["washer-plug", "dryer-plug", "living-trv"];
  const pad = "x".repeat(300);
  const fake = (i: number) => ({ ieee_address: `0x${i.toString(16).padStart(16, "0")}`, type: "Router", friendly_name: `fake-${i}`, pad });
  const list = Buffer.from(JSON.stringify(Array.from({ length: 900 }, (_, i) => fake(i))));
  let states = 0;
  let lists = 0;
  const end = Date.now() + ms;
  try {
    while (Date.now() < end) {
      for (let k = 0; k < 200; k++) {
        const body = JSON.stringify({ state: "ON", power: Math.round(Math.random() * 2000), energy: 12.5, voltage: 230, pad });
        c.publish(`${base}/${names[k % names.length]}`, body, { qos: 0 });
        states++;
      }
      if (states % 2000 === 0) {
        c.publish(`${base}/bridge/devices`, list, { qos: 0 });
        lists++;
      }
      await c.publishAsync(`${base}/${names[0]}/availability`, '{"state":"online"}', { qos: 0 }); // written: the socket drained this far
    }
  } finally {
    await c.endAsync();
  }
  return { states, lists };
}

const bench: BenchFn = async (ctx) => {
  const quick = ctx.quick;
  const slowMs = quick ? 10_000 : 40_000;
  const floodZigbeeMs = quick ? 5_000 : 20_000;
  const afterMs = 60_000;
  const broker = await startLocalBroker(join(ctx.dir, "broker"));
  try {
    return await withSite(zigbeeScenario(broker.url), async () => {
      const daemon = await spawnDaemon(
        ctx.dir,
        {
          // The attacker is on the allowlist: the worst case (a compromised LAN host, or a partner gone wrong).
          auth: { ...testConfigInput(ctx.dir).auth, ip_allowlist: ["127.0.0.0/8"] },
          zigbee: zigbeeConfig(broker.url),
        },
        { env: benchEnv() },
      );
      const pid = daemon.child.pid!;
      const s = new Sampler(pid);
      const rows: BenchRow[] = [];
      try {
        await sleep(quick ? 5000 : 15_000); // wait: start-up settles (pairing, first polls) before the start figure
        const start = s.sample();
        ctx.log(`start: ${s.detail()}; ${await heapLine(daemon.url)}; on ${allocator(pid)}`);
        const url = new URL(daemon.url);
        s.phase = "slow TLS clients";
        const slow = await slowClients(url, 1200, 20, slowMs);
        ctx.log(`slow clients: ${slow.opened} handshakes, ${slow.closed} closed; ${s.detail()}; ${await heapLine(daemon.url)}`);
        s.phase = "dispatch flood";
        const dr = await drFlood(daemon.url, 10_000, 8);
        ctx.log(`dispatch flood: ${[...dr].map(([k, v]) => `${v}x HTTP ${k}`).join(", ")}; ${s.detail()}; ${await heapLine(daemon.url)}`);
        s.phase = "credential guessing";
        const g = await guesses(daemon.url, 40, quick ? 2 : 5);
        ctx.log(`guessing: ${[...g].map(([k, v]) => `${v}x ${k}`).join(", ")}; ${s.detail()}; ${await heapLine(daemon.url)}`);
        s.phase = "zigbee flood";
        const z = await zigbeeFlood(broker.url, floodZigbeeMs);
        ctx.log(`zigbee flood: ${z.states} state messages, ${z.lists} forged device lists; ${s.detail()}; ${await heapLine(daemon.url)}`);
        ctx.log(`answers: ${[...samples].map(([k, v]) => `${k}: ${v}`).join(" | ")}`);
        s.phase = "after";
        for (let t = 0; t < afterMs; t += 10_000) {
          await sleep(10_000); // wait: RSS 60 s after the attack, logged every 10 s
          ctx.log(`+${(t + 10_000) / 1000} s: ${s.detail()}; ${await heapLine(daemon.url)}`);
        }
        const after = s.sample();
        if (!daemon.alive()) throw new Error("the daemon died under the attacks");
        const hwm = procKb(pid, "status", "VmHWM") / MiB;
        const phasePeaks = ["slow TLS clients", "dispatch flood", "credential guessing", "zigbee flood"].map((p) => s.peaks.get(p) ?? NaN);
        const peak = Math.max(...phasePeaks, hwm);
        const note = "lower is better; >= 1.00x passes";
        rows.push(
          { name: "hostile load: RSS at start", value: start, unit: "MiB", reference: null, ratio: null },
          ...phasePeaks.map((v, i) => ({
            name: `hostile load: RSS peak, ${["slow TLS clients (1,200)", "dispatch flood (10,000 events)", "credential guessing (40 + 40 parallel)", "zigbee flood"][i]}`,
            value: v,
            unit: "MiB",
            reference: PEAK_BOUND,
            ratio: PEAK_BOUND / v,
            note: `bound ${PEAK_BOUND} MiB; ${note}`,
          })),
          {
            name: "hostile load: RSS peak over all (VmHWM)",
            value: peak,
            unit: "MiB",
            reference: PEAK_BOUND,
            ratio: PEAK_BOUND / peak,
            note: `bound ${PEAK_BOUND} MiB; ${note}`,
          },
          {
            name: "hostile load: RSS 60 s after the attacks",
            value: after,
            unit: "MiB",
            reference: start + RETURN_MARGIN,
            ratio: (start + RETURN_MARGIN) / after,
            note: `start + ${RETURN_MARGIN} MiB; ${note}`,
          },
        );
        return rows;
      } finally {
        s.stop();
        await daemon.stop();
      }
    });
  } finally {
    await broker.stop();
  }
};

function benchEnv(): Record<string, string> {
  return Object.fromEntries(
    (process.env.BENCH_ENV ?? "")
      .split(/\s+/)
      .filter(Boolean)
      .map((kv) => [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)]),
  );
}

export default bench;
