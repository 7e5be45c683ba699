// `make fuzz`, third part: a connection flood (issue 40): 8 source addresses (127.0.0.2-9) open 64 idle
// TCP connections each and open another whenever one is closed, for FLOOD_S seconds, while
// a fresh connection from the allowlisted 127.0.0.1 asks for /healthz every 200 ms. Twice,
// each against a daemon of its own (`sitegate run` with the unit's node flags):
// - `outside`: the 8 on no allowlist (the config's defaults), refused at accept;
// - `inside`: the 8 on an allowlist (as installers' phones are on ui.allow's LAN ranges),
//   so they fill the 512 slots and 127.0.0.1 takes the biggest holder's oldest idle one.
// Prints one row: how many /healthz probes were answered 200 within 2 s (passes at >= 95 %
// each), their p99, and the daemon's refusals and evictions. FUZZ_FLOOD_S: the length.
import { mkdtempSync, rmSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Agent, request } from "undici";
import type { ConfigInput } from "../../src/config/schema.js";
import { spawnDaemon, type DaemonProcess } from "../support/daemon-process.js";
import { testConfigInput } from "../support/config.js";
import { testCert } from "../support/tls.js";

const SOURCES = 8;
const PER_SOURCE = 64;
const FLOOD_S = 40;
const ANSWER_WITHIN_MS = 2000;
const PROBE_EVERY_MS = 200;
const SHARE_LIMIT = 0.95;

/** 8 × 64 idle TCP connections that come back whenever they are closed; stop() ends them. */
function flood(url: URL) {
  let stopped = false;
  let opened = 0;
  const live = new Set<Socket>();
  const open = (from: string) => {
    if (stopped) return;
    opened++;
    const s = connect({ host: url.hostname, port: Number(url.port), localAddress: from });
    live.add(s);
    s.on("error", () => {});
    s.once("close", () => {
      live.delete(s);
      setImmediate(() => open(from)); // again at once, as the attack did
    });
  };
  for (let i = 0; i < SOURCES; i++) for (let j = 0; j < PER_SOURCE; j++) open(`127.0.0.${2 + i}`);
  return {
    get opened() {
      return opened;
    },
    stop() {
      stopped = true;
      for (const s of live) s.destroy();
    },
  };
}

/** One /healthz on a connection of its own: ms to a 200, or Infinity. */
async function probe(d: DaemonProcess, ca: string): Promise<number> {
  const agent = new Agent({ connect: { ca, timeout: ANSWER_WITHIN_MS }, localAddress: "127.0.0.1" });
  const t = performance.now();
  try {
    const r = await request(`${d.url}/healthz`, { dispatcher: agent, headersTimeout: ANSWER_WITHIN_MS, bodyTimeout: ANSWER_WITHIN_MS });
    await r.body.dump();
    return r.statusCode === 200 ? performance.now() - t : Infinity;
  } catch {
    return Infinity;
  } finally {
    await agent.destroy();
  }
}

async function metricsText(d: DaemonProcess, ca: string): Promise<string> {
  const agent = new Agent({ connect: { ca }, localAddress: "127.0.0.1" });
  try {
    const r = await request(`${d.url}/metrics`, { dispatcher: agent });
    return await r.body.text();
  } catch {
    return "";
  } finally {
    await agent.destroy();
  }
}

const sum = (text: string, re: RegExp) => [...text.matchAll(re)].reduce((n, m) => n + Number(m[1]), 0);

async function floodRun(kind: "outside" | "inside", ca: string, seconds: number) {
  const dir = mkdtempSync(join(tmpdir(), `sitegate-flood-${kind}-`));
  const base = testConfigInput(join(dir, "data"));
  const over: Partial<ConfigInput> = kind === "inside" ? { ui: { enabled: true, allow: ["127.0.0.0/8"] } } : {};
  const d = await spawnDaemon(dir, { ...over, http: { ...base.http, rate_limit_per_min: 100_000 } });
  try {
    const f = flood(new URL(d.url));
    const times: number[] = [];
    const t0 = performance.now();
    while (performance.now() - t0 < seconds * 1000 && d.alive()) {
      const started = performance.now();
      times.push(await probe(d, ca));
      const rest = PROBE_EVERY_MS - (performance.now() - started);
      if (rest > 0) await new Promise((r) => setTimeout(r, rest)); // the probe's sampling interval, not a wait
    }
    const text = await metricsText(d, ca);
    f.stop();
    const answered = times.filter((t) => t <= ANSWER_WITHIN_MS);
    const sorted = [...answered].sort((a, b) => a - b);
    return {
      alive: d.alive(),
      share: times.length ? answered.length / times.length : 0,
      probes: times.length,
      p99: sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(0.99 * sorted.length))]! : Infinity,
      opened: f.opened,
      refused: sum(text, /^sitegate_http_connections_refused_total\{[^}]*\} (\d+)$/gm),
      evicted: sum(text, /^sitegate_http_connections_evicted_total\{[^}]*\} (\d+)$/gm),
    };
  } finally {
    await d.stop().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<number> {
  const ca = testCert().cert;
  const seconds = Number(process.env.FUZZ_FLOOD_S ?? FLOOD_S);
  const runs = { outside: await floodRun("outside", ca, seconds), inside: await floodRun("inside", ca, seconds) };
  const ok = Object.values(runs).every((r) => r.alive && r.share >= SHARE_LIMIT);
  const row = [
    "flood-fuzz",
    `sources=${SOURCES}x${PER_SOURCE}`,
    `seconds=${seconds}`,
    ...Object.entries(runs).map(
      ([k, r]) =>
        `${k}=healthz_2s:${(r.share * 100).toFixed(1)}%/${r.probes},p99_ms:${r.p99.toFixed(0)},conns_opened:${r.opened},refused:${r.refused},evicted:${r.evicted},alive:${r.alive ? "yes" : "no"}`,
    ),
    ok ? "PASS" : "FAIL",
  ];
  process.stdout.write(row.join("  ") + "\n");
  return ok ? 0 : 1;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (e) => {
    process.stderr.write(`flood fuzz: ${(e as Error).stack ?? String(e)}\n`);
    process.exitCode = 1;
  },
);
