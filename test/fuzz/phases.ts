// The phases `make fuzz` runs after its mutated requests (api.fuzz.ts), each with its own
// bound from DESIGN B3/B4: parallel password guessing (at most 10 of 40 checked), a dispatch
// flood up to the open-events limit then a restart (alive, back in under 30 s), and slow
// clients from many other loopback addresses (>= 95 % closed by the server within 60 s of
// their first byte while /healthz from another source stays under 250 ms at p99).
import { randomUUID } from "node:crypto";
import { connect, type ConnectionOptions } from "node:tls";
import { Agent, request } from "undici";
import type { ConfigInput } from "../../src/config/schema.js";
import { MAX_OPEN_EVENTS } from "../../src/dispatch/request.js";
import { spawnDaemon, type DaemonProcess } from "../support/daemon-process.js";
import { TEST_API_KEY } from "../support/config.js";

export interface PhaseResult {
  ok: boolean;
  fiveXX: number;
  /** key=value fields for the summary row. */
  summary: string;
  /** Lines printed under the row (what failed). */
  notes: string[];
}

const FORM = "application/x-www-form-urlencoded";
const GUESSES = 40;
const MAX_CHECKED = 10;
const RESTART_LIMIT_S = 30;
const CLOSE_WITHIN_MS = 60_000;
const HEALTHZ_P99_LIMIT_MS = 250;
const LAG_P99_LIMIT_MS = 50;

const from = (ca: string, ip: string, connections = 64) => new Agent({ connect: { ca }, localAddress: ip, connections });

async function passwordChecks(d: DaemonProcess, ca: string): Promise<number> {
  const agent = from(ca, "127.0.0.1", 1);
  try {
    const r = await request(`${d.url}/metrics`, { dispatcher: agent });
    const m = /^sitegate_password_checks_total (\d+)$/m.exec(await r.body.text());
    if (!m) throw new Error("no sitegate_password_checks_total in /metrics");
    return Number(m[1]);
  } finally {
    await agent.close();
  }
}

async function postForm(agent: Agent, url: string, body: Record<string, string>, cookie?: string): Promise<number> {
  const r = await request(url, {
    method: "POST",
    headers: { "content-type": FORM, ...(cookie ? { cookie } : {}) },
    body: new URLSearchParams(body).toString(),
    dispatcher: agent,
  });
  await r.body.dump();
  return r.statusCode;
}

/** 40 wrong passwords at once at /connect/token (one new username), and 40 at the status page login. */
export async function parallelGuessing(d: DaemonProcess, ca: string): Promise<PhaseResult> {
  const tokenAgent = from(ca, "127.0.0.200");
  const uiAgent = from(ca, "127.0.0.201");
  try {
    const user = `guess-${randomUUID().slice(0, 8)}`;
    const c0 = await passwordChecks(d, ca);
    const grant = { grant_type: "password", client_id: "partner-portal", username: user, password: "wrong" };
    const token = await Promise.all(Array.from({ length: GUESSES }, () => postForm(tokenAgent, `${d.url}/connect/token`, grant)));
    const c1 = await passwordChecks(d, ca);
    const page = await request(`${d.url}/ui/login`, { dispatcher: uiAgent });
    const csrf = /name="csrf" value="([^"]+)"/.exec(await page.body.text())?.[1] ?? "";
    const ui = await Promise.all(
      Array.from({ length: GUESSES }, (_, i) =>
        postForm(uiAgent, `${d.url}/ui/login`, { csrf, username: `${user}-${i}`, password: "wrong" }, `sg_login=${csrf}`),
      ),
    );
    const c2 = await passwordChecks(d, ca);
    const [tokenChecked, uiChecked] = [c1 - c0, c2 - c1];
    const fiveXX = [...token, ...ui].filter((s) => s >= 500).length;
    const ok = tokenChecked <= MAX_CHECKED && uiChecked <= MAX_CHECKED && fiveXX === 0;
    return {
      ok,
      fiveXX,
      summary: `guesses_checked=token:${tokenChecked}/${GUESSES},ui:${uiChecked}/${GUESSES}`,
      notes: ok ? [] : [`guessing: token statuses ${token.join(",")}; ui statuses ${ui.join(",")}`],
    };
  } finally {
    await Promise.all([tokenAgent.close(), uiAgent.close()]);
  }
}

const DAY = 86_400_000;

function floodEvent(start: number) {
  return {
    event_id: randomUUID(),
    start_time: new Date(start).toISOString(),
    end_time: new Date(start + 3_600_000).toISOString(),
    event_type: "discharge",
    event_quantity: 1,
    event_unit: "kW",
    priority: 50,
    mandatory: false,
    cancelled: false,
  };
}

async function postDr(agent: Agent, d: DaemonProcess, events: unknown[]): Promise<{ status: number; text: string }> {
  const r = await request(`${d.url}/v1/api/gateway/site-001/dr`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": TEST_API_KEY },
    body: JSON.stringify({ mode: "test", event_slots: events }),
    dispatcher: agent,
  });
  return { status: r.statusCode, text: await r.body.text() };
}

/** Seconds from spawning a daemon on the same data until /healthz answers 200. */
async function restart(d: DaemonProcess, dir: string, over: Partial<ConfigInput>, ca: string) {
  await d.stop();
  const t0 = performance.now();
  const next = await spawnDaemon(dir, over);
  const agent = from(ca, "127.0.0.1", 1);
  try {
    for (;;) {
      const r = await request(`${next.url}/healthz`, { dispatcher: agent }).catch(() => null);
      if (r) await r.body.dump();
      if (r?.statusCode === 200) break;
      if (performance.now() - t0 > 120_000 || !next.alive()) break;
      await new Promise((res) => setTimeout(res, 50)); // polling for readiness, not a timed assertion
    }
  } finally {
    await agent.close();
  }
  return { daemon: next, seconds: (performance.now() - t0) / 1000 };
}

/** /dr requests of 100 events each until the open-events limit answers 400; a start in 2090; then a restart. */
export async function dispatchFlood(
  d: DaemonProcess,
  dir: string,
  over: Partial<ConfigInput>,
  ca: string,
): Promise<{ daemon: DaemonProcess; result: PhaseResult }> {
  const agent = from(ca, "127.0.0.202", 4);
  let accepted = 0;
  let fiveXX = 0;
  let limitHit = false;
  let farRefused = false;
  const notes: string[] = [];
  try {
    const now = Date.now();
    for (let i = 0; i < MAX_OPEN_EVENTS / 100 + 20 && !limitHit; i++) {
      const events = Array.from({ length: 100 }, (_, j) => floodEvent(now + DAY + ((i * 100 + j) % (29 * 24)) * 3_600_000));
      const r = await postDr(agent, d, events);
      if (r.status === 200) accepted += 100;
      else if (r.status === 400 && /limit of 10000/.test(r.text)) limitHit = true;
      else if (r.status >= 500) fiveXX++;
      else notes.push(`flood: ${r.status} ${r.text.slice(0, 200)}`);
    }
    const far = await postDr(agent, d, [floodEvent(Date.UTC(2090, 0, 1))]);
    farRefused = far.status === 400 && /31 days/.test(far.text);
    if (!farRefused) notes.push(`a start in 2090: ${far.status} ${far.text.slice(0, 200)}`);
    if (!limitHit) notes.push(`flood: the open-events limit never answered (accepted ${accepted})`);
  } finally {
    await agent.close();
  }
  const again = await restart(d, dir, over, ca);
  const alive = again.daemon.alive();
  const ok = limitHit && farRefused && alive && again.seconds < RESTART_LIMIT_S && fiveXX === 0;
  return {
    daemon: again.daemon,
    result: {
      ok,
      fiveXX,
      summary: `dr_flood=accepted:${accepted},limit_400:${limitHit ? "yes" : "no"},restart_s=${again.seconds.toFixed(1)}`,
      notes,
    },
  };
}

interface Slow {
  startedAt: number;
  /** When its first byte went out (TLS up), or undefined when it was refused before. */
  firstByteAt?: number;
  closedAt?: number;
}

/** One trickling client: TLS, the head of a request, then one body byte a second until the server closes it. */
function slowClient(url: URL, ip: string, ca: string, i: number): Slow {
  const s: Slow = { startedAt: performance.now() };
  const socket = connect({
    host: url.hostname,
    port: Number(url.port),
    ca,
    checkServerIdentity: () => undefined,
    localAddress: ip,
  } as ConnectionOptions);
  let timer: NodeJS.Timeout | undefined;
  socket.on("error", () => {});
  socket.once("secureConnect", () => {
    s.firstByteAt = performance.now();
    const head =
      i % 2 === 0
        ? "POST /v1/api/gateway/site-001/dr HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
        : `POST /connect/token HTTP/1.1\r\nHost: x\r\nContent-Type: ${FORM}\r\nContent-Length: 100000\r\n\r\n`;
    socket.write(head);
    timer = setInterval(() => socket.write("a"), 1000); // the trickle's pace
  });
  socket.once("close", () => {
    clearInterval(timer);
    s.closedAt = performance.now();
  });
  slowSockets.push(socket);
  return s;
}
const slowSockets: Array<ReturnType<typeof connect>> = [];

type Buckets = Map<number, number>;

/** 1,000 slow clients (200 with FUZZ_QUICK) from other loopback addresses while /healthz is probed from 127.0.0.1. */
export async function slowClients(
  d: DaemonProcess,
  ca: string,
  quick: boolean,
  lagP99Ms: (a: Buckets, b: Buckets) => number,
  lagBuckets: (agent: Agent) => Promise<Buckets>,
): Promise<PhaseResult> {
  const n = quick ? 200 : 1000;
  const addresses = Math.ceil(n / 83); // more than the 64 per source from each: both limits are met
  const probe = new Agent({ connect: { ca }, pipelining: 1, connections: 1 });
  const healthz: number[] = [];
  let healthzFailures = 0;
  let stop = false;
  const lagBefore = await lagBuckets(probe); // the probe's connection is up before the flood
  const prober = (async () => {
    while (!stop) {
      const t = performance.now();
      try {
        const r = await request(`${d.url}/healthz`, { dispatcher: probe });
        await r.body.dump();
        if (r.statusCode === 200) healthz.push(performance.now() - t);
        else healthzFailures++;
      } catch {
        healthzFailures++;
      }
      await new Promise((r) => setTimeout(r, 100)); // the probe's sampling interval, not a wait
    }
  })();
  const url = new URL(d.url);
  const clients: Slow[] = [];
  for (let i = 0; i < n; i++) {
    clients.push(slowClient(url, `127.0.1.${1 + (i % addresses)}`, ca, i));
    if (i % 10 === 9) await new Promise((r) => setTimeout(r, 100)); // a ramp of 100 connections a second
  }
  const deadline = performance.now() + CLOSE_WITHIN_MS + 5000;
  while (clients.some((c) => c.closedAt === undefined) && performance.now() < deadline) await new Promise((r) => setTimeout(r, 500)); // polling the sockets' state
  const lagP99 = lagP99Ms(lagBefore, await lagBuckets(probe));
  stop = true;
  await prober;
  for (const s of slowSockets.splice(0)) s.destroy();
  await probe.close();
  const refused = clients.filter((c) => c.firstByteAt === undefined).length;
  const inTime = clients.filter((c) => c.closedAt !== undefined && c.closedAt - (c.firstByteAt ?? c.startedAt) <= CLOSE_WITHIN_MS).length;
  const sorted = [...healthz].sort((a, b) => a - b);
  const p99 = sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(0.99 * sorted.length))] : Infinity;
  const share = inTime / n;
  const ok = share >= 0.95 && p99 < HEALTHZ_P99_LIMIT_MS && healthzFailures === 0 && lagP99 <= LAG_P99_LIMIT_MS && d.alive();
  return {
    ok,
    fiveXX: 0,
    summary: `slow_clients=${n}  closed_60s=${(share * 100).toFixed(1)}%  refused_at_accept=${refused}  slow_healthz_p99_ms=${p99.toFixed(1)}  slow_lag_p99_ms<=${lagP99.toFixed(1)}`,
    notes: ok ? [] : [`slow clients: healthz failures ${healthzFailures}, samples ${healthz.length}`],
  };
}
