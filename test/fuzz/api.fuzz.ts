// `make fuzz`: mutated requests against a live daemon (`sitegate run` with the unit's node
// flags, its own process) on every API route, the token endpoint and the status page, from
// several loopback source addresses at once; then parallel password guessing, a dispatch
// flood up to the open-events limit followed by a restart, and slow clients that trickle
// their requests from many other loopback addresses (phases.ts). Counts the answers and
// fails unless there are 0 5xx, 0 crashes, the daemon's event-loop lag p99 (its /metrics
// histogram: the upper bound of the bucket the p99 falls in) is at most 50 ms in the mutated
// run and in the slow-client run, and each phase meets its own bound. Prints one summary
// row. FUZZ_QUICK=1: a short run for CI (fewer requests and slow clients); FUZZ_N, FUZZ_SEED
// override the count and the seed. Loopback only; at most CONCURRENCY mutated requests in flight.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Agent, request } from "undici";
import { seeded } from "../support/seeded.js";
import { event } from "../support/dispatch.js";
import { configurePath, tcpDevice } from "../support/gateway.js";
import { spawnDaemon, type DaemonProcess } from "../support/daemon-process.js";
import { testConfigInput, TEST_API_KEY, TEST_PASSWORD } from "../support/config.js";
import { testCert } from "../support/tls.js";
import { dispatchFlood, parallelGuessing, slowClients, type PhaseResult } from "./phases.js";

const QUICK = process.env.FUZZ_QUICK === "1";
const N = Number(process.env.FUZZ_N ?? (QUICK ? 1500 : 20_000));
const SEED = Number(process.env.FUZZ_SEED ?? 18);
const CONCURRENCY = 16;
const SOURCES = 16; // 127.0.0.1 .. 127.0.0.16
const LAG_P99_LIMIT_MS = 50;

const { rnd, int, pick } = seeded(SEED);

interface Req {
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: string;
}

const FORM = "application/x-www-form-urlencoded";
const JSON_T = "application/json";
const PRINTABLE = " !\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~\t";
const PATH_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789-._~%/;:@!$&'()*+,=?#[]";
const junk = (n: number, chars = PRINTABLE) => Array.from({ length: n }, () => chars[int(chars.length)]).join("");
const sizes = [0, 1, 7, 64, 1000, 7000, 16_000];

function seeds(token: string): Req[] {
  const dr = event({}, 3_600_000, 60_000);
  const device = tcpDevice("fz-1", 9, 1, "sunspec", { device_name: "fz" });
  return [
    {
      method: "POST",
      path: "/connect/token",
      headers: { "content-type": FORM },
      body: new URLSearchParams({
        grant_type: "password",
        client_id: "partner-portal",
        username: "partner",
        password: TEST_PASSWORD,
      }).toString(),
    },
    {
      method: "POST",
      path: "/connect/token",
      headers: { "content-type": FORM, authorization: `Basic ${Buffer.from("partner-portal:").toString("base64")}` },
      body: "grant_type=password&username=partner&password=wrong",
    },
    {
      method: "POST",
      path: "/v1/api/gateway/site-001/dr",
      headers: { "content-type": JSON_T, "x-api-key": TEST_API_KEY },
      body: JSON.stringify({ event_slots: [dr] }),
    },
    { method: "GET", path: "/v1/api/gateway/site-001/devicesync", headers: { "x-api-key": TEST_API_KEY } },
    {
      method: "PUT",
      path: configurePath(),
      headers: { "content-type": JSON_T, authorization: `Bearer ${token}` },
      body: JSON.stringify({ devices: [device] }),
    },
    { method: "GET", path: "/healthz", headers: {} },
    { method: "GET", path: "/metrics", headers: {} },
    { method: "GET", path: "/openapi.json", headers: {} },
    { method: "GET", path: "/ui/login", headers: {} },
    {
      method: "POST",
      path: "/ui/login",
      headers: { "content-type": FORM, cookie: "sg_login=abc" },
      body: "csrf=abc&username=partner&password=wrong",
    },
    { method: "GET", path: "/ui/api/overview", headers: { cookie: "sg_session=x" } },
    {
      method: "POST",
      path: "/ui/api/commission/scan",
      headers: { "content-type": JSON_T, cookie: "sg_session=x", "x-csrf-token": "y" },
      body: "{}",
    },
  ];
}

function mutateJson(body: string): string {
  let v: unknown;
  try {
    v = JSON.parse(body);
  } catch {
    return body;
  }
  const values: unknown[] = [
    null,
    true,
    0,
    -1,
    1e308,
    -0,
    "",
    "x".repeat(int(5000)),
    [],
    {},
    "\u0000",
    "\ud800",
    "2024-13-45T25:61:61Z",
    2 ** 53 + 1,
    "NaN",
    { __proto__: { polluted: 1 } },
    { constructor: { prototype: { x: 1 } } },
  ];
  const walk = (x: unknown, depth: number): unknown => {
    if (rnd() < 0.15 || depth > 6) return pick(values);
    if (Array.isArray(x)) return rnd() < 0.2 ? [...x, ...x] : x.map((y) => walk(y, depth + 1));
    if (x && typeof x === "object") {
      const o: Record<string, unknown> = {};
      for (const [k, y] of Object.entries(x)) if (rnd() > 0.1) o[rnd() < 0.05 ? junk(4) : k] = walk(y, depth + 1);
      if (rnd() < 0.1) o[pick(["__proto__", "constructor", "extra", junk(8)])] = pick(values);
      return o;
    }
    return rnd() < 0.5 ? pick(values) : x;
  };
  return JSON.stringify(walk(v, 0));
}

function mutateBytes(body: string): string {
  const b = Buffer.from(body);
  switch (int(5)) {
    case 0:
      return b.subarray(0, int(b.length + 1)).toString("latin1");
    case 1: {
      for (let i = 0; i < 1 + int(4); i++) if (b.length) b[int(b.length)] = int(256);
      return b.toString("latin1");
    }
    case 2:
      return body.slice(0, int(body.length)) + junk(int(64)) + body.slice(int(body.length));
    case 3:
      return "[".repeat(5000 + int(20_000)) + "]".repeat(int(2) ? 5000 : 0);
    default:
      return body + junk(pick(sizes));
  }
}

function mutateForm(body: string): string {
  const p = new URLSearchParams(body);
  const keys = ["grant_type", "client_id", "username", "password", "scope", "csrf", junk(3)];
  for (let i = 0; i < 1 + int(3); i++) {
    const k = pick(keys);
    if (rnd() < 0.3) p.delete(k);
    else if (rnd() < 0.5) p.append(k, junk(pick(sizes)));
    else p.set(k, pick(["password", "client_credentials", "", "%", "%zz", "partner", "partner-portal", "\u0000", junk(int(300))]));
  }
  return rnd() < 0.2 ? p.toString().replace(/%[0-9A-F]{2}/, "%") : p.toString();
}

function mutateHeaders(h: Record<string, string>): Record<string, string> {
  const out = { ...h };
  const authValues = () =>
    pick([
      `Basic${" ".repeat(pick(sizes))}x y`,
      `Basic ${junk(pick(sizes))}`,
      `Basic ${Buffer.from(`${junk(int(40))}:${junk(int(5))}`).toString("base64")}`,
      `Bearer${"\t".repeat(int(3000))}${junk(int(50))}`,
      `Bearer ${junk(int(2000), "abcdefABCDEF0123456789-_.")}`,
      junk(pick(sizes)),
      "Basic",
      "Bearer",
    ]);
  for (let i = 0; i < 1 + int(3); i++) {
    switch (int(7)) {
      case 0:
        out.authorization = authValues();
        break;
      case 1:
        out.cookie = pick([
          "a=%",
          "sg_session=%E0%A4%A",
          "sg_login=%; a=%zz",
          `sg_session=${junk(pick(sizes), "abcdef%=;")}`,
          `${junk(50)}=${junk(50)}`,
          ";;;=;=",
        ]);
        break;
      case 2:
        out["content-type"] = pick([
          JSON_T,
          FORM,
          "text/plain",
          "application/json; charset=utf-16",
          "multipart/form-data; boundary=x",
          junk(int(200)),
          "",
          "application/x-www-form-urlencoded;" + " ".repeat(5000),
        ]);
        break;
      case 3:
        out["x-api-key"] = pick([TEST_API_KEY, "", junk(pick(sizes)), TEST_API_KEY + " "]);
        break;
      case 4:
        out["x-csrf-token"] = junk(int(100));
        break;
      case 5:
        out[`x-${junk(6, "abcdefghij")}`] = junk(pick(sizes));
        break;
      default:
        delete out[pick(Object.keys(out).concat(["authorization"]))];
    }
  }
  return out;
}

function mutatePath(path: string): string {
  switch (int(6)) {
    case 0:
      return path + junk(int(200), PATH_CHARS);
    case 1:
      return path.replace(/site-001|v1|admin|token|ui/, () =>
        pick(["site-999", "%2e%2e", "..", "%", "%00", "v2", junk(int(40), PATH_CHARS)]),
      );
    case 2:
      return "/" + junk(pick([1, 50, 2000, 6000]), PATH_CHARS);
    case 3:
      return path.replace("/", "//");
    case 4:
      return path + (path.includes("?") ? "&" : "?") + junk(int(500), PATH_CHARS);
    default:
      return path;
  }
}

function mutate(base: Req): Req {
  const r: Req = { ...base, headers: { ...base.headers } };
  const n = 1 + int(3);
  for (let i = 0; i < n; i++) {
    switch (int(6)) {
      case 0:
        r.method = pick(["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"]);
        break;
      case 1:
        r.path = mutatePath(r.path);
        break;
      case 2:
        r.headers = mutateHeaders(r.headers);
        break;
      case 3:
        if (r.body !== undefined) r.body = r.headers["content-type"] === FORM ? mutateForm(r.body) : mutateJson(r.body);
        break;
      case 4:
        if (r.body !== undefined) r.body = mutateBytes(r.body);
        break;
      default:
        if (rnd() < 0.05) r.body = "x".repeat(300 * 1024); // over the body limit
    }
  }
  if ((r.method === "GET" || r.method === "HEAD") && r.body !== undefined) delete r.body;
  return r;
}

function quantile(xs: number[], q: number): number {
  if (xs.length === 0) return 0;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
}

/** The daemon's event-loop lag histogram from /metrics: cumulative count per upper bound (seconds). */
async function lagBuckets(d: DaemonProcess, agent: Agent): Promise<Map<number, number>> {
  const r = await request(`${d.url}/metrics`, { dispatcher: agent });
  const text = await r.body.text();
  const buckets = new Map<number, number>();
  for (const m of text.matchAll(/^sitegate_event_loop_lag_seconds_bucket\{le="([^"]+)"\} (\d+)$/gm))
    buckets.set(m[1] === "+Inf" ? Infinity : Number(m[1]), Number(m[2]));
  if (buckets.size === 0) throw new Error(`no event-loop lag histogram in /metrics (${r.statusCode})`);
  return buckets;
}

/**
 * p99 of the lag samples taken between two scrapes, as the upper bound of the histogram
 * bucket it falls in (in ms): the smallest bound whose count grew by 99 % of all samples.
 */
function lagP99Ms(before: Map<number, number>, after: Map<number, number>): number {
  const bounds = [...after.keys()].sort((a, b) => a - b);
  const total = (after.get(Infinity) ?? 0) - (before.get(Infinity) ?? 0);
  if (total <= 0) throw new Error("no event-loop lag samples during the run");
  for (const le of bounds) if ((after.get(le) ?? 0) - (before.get(le) ?? 0) >= 0.99 * total) return le * 1000;
  return Infinity;
}

async function main(): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), "sitegate-fuzz-"));
  const base = testConfigInput(join(dir, "data"));
  const loopback8 = ["127.0.0.0/8", "::1/128"];
  const over = {
    http: { ...base.http, rate_limit_per_min: 100_000_000 },
    auth: { ...base.auth, ip_allowlist: loopback8, admin_allowlist: loopback8 },
    ui: { enabled: true, allow: loopback8 },
  };
  let d = await spawnDaemon(dir, over);
  const ca = testCert().cert;
  const agents = Array.from(
    { length: SOURCES },
    (_, i) => new Agent({ connect: { ca }, localAddress: `127.0.0.${i + 1}`, connections: 4, pipelining: 1 }),
  );
  const probe = new Agent({ connect: { ca }, pipelining: 1 });
  const counts = { requests: 0, "2xx": 0, "3xx": 0, "4xx": 0, "429": 0, "5xx": 0, net_errors: 0, skipped: 0 };
  const fiveXX: string[] = [];
  const healthz: number[] = [];
  let crashed = false;
  d.child.once("exit", () => (crashed = true));
  try {
    const tr = await request(`${d.url}/connect/token`, {
      method: "POST",
      headers: { "content-type": FORM },
      body: `grant_type=password&client_id=partner-portal&username=partner&password=${TEST_PASSWORD}`,
      dispatcher: probe,
    });
    const token = ((await tr.body.json()) as { access_token: string }).access_token;
    const corpus = seeds(token);
    // Lag is counted from this scrape on (the start-up's own lag is not the fuzz's).
    const lagBefore = await lagBuckets(d, probe);
    const t0 = performance.now();
    let issued = 0;
    let stopProbe = false;
    const prober = (async () => {
      while (!stopProbe && !crashed) {
        const t = performance.now();
        try {
          const r = await request(`${d.url}/healthz`, { dispatcher: probe });
          await r.body.text();
          healthz.push(performance.now() - t);
        } catch {
          // counted by the crash check
        }
        await new Promise((r) => setTimeout(r, 100)); // the probe's sampling interval, not a wait
      }
    })();
    const worker = async () => {
      while (issued < N && !crashed) {
        issued++;
        const req = mutate(pick(corpus));
        try {
          const r = await request(`${d.url}${req.path}`, {
            method: req.method as "GET",
            headers: req.headers,
            body: req.body,
            dispatcher: pick(agents),
            headersTimeout: 30_000,
            bodyTimeout: 30_000,
          });
          await r.body.dump();
          counts.requests++;
          const s = r.statusCode;
          if (s === 429) counts["429"]++;
          if (s >= 500) {
            counts["5xx"]++;
            if (fiveXX.length < 10) fiveXX.push(`${s} ${req.method} ${req.path.slice(0, 80)} ${JSON.stringify(req.headers).slice(0, 200)}`);
          } else counts[`${Math.floor(s / 100)}xx` as "2xx"]++;
        } catch (e) {
          const code = (e as { code?: string }).code ?? "";
          if (code === "UND_ERR_INVALID_ARG" || code === "ERR_INVALID_CHAR" || code === "ERR_INVALID_ARG_TYPE") counts.skipped++; // the client refused to send it
          else {
            counts.requests++;
            counts.net_errors++; // e.g. the connection closed after a 431 for oversized headers
          }
        }
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    stopProbe = true;
    await prober;
    const seconds = (performance.now() - t0) / 1000;
    const lagP99 = crashed ? NaN : lagP99Ms(lagBefore, await lagBuckets(d, probe));
    const fuzzOk = d.alive() && !crashed;
    const errorLines = d.lines.filter((l) => Number(l.level) >= 50).length;
    const phases: PhaseResult[] = [];
    phases.push(await parallelGuessing(d, ca));
    const flood = await dispatchFlood(d, dir, over, ca);
    d = flood.daemon;
    phases.push(flood.result);
    phases.push(
      await slowClients(
        d,
        ca,
        QUICK,
        (a, b) => lagP99Ms(a, b),
        (agent) => lagBuckets(d, agent),
      ),
    );
    const phase5xx = phases.reduce((n, p) => n + p.fiveXX, 0);
    const alive = fuzzOk && d.alive();
    const ok =
      alive &&
      counts["5xx"] + phase5xx === 0 &&
      lagP99 <= LAG_P99_LIMIT_MS &&
      counts.requests >= N * 0.99 &&
      counts.net_errors < N * 0.05 &&
      phases.every((p) => p.ok);
    const row = [
      `fuzz${QUICK ? " (quick)" : ""}`,
      `requests=${counts.requests}`,
      `2xx=${counts["2xx"]}`,
      `3xx=${counts["3xx"]}`,
      `4xx=${counts["4xx"]}`,
      `of_which_429=${counts["429"]}`,
      `5xx=${counts["5xx"]}`,
      `net_errors=${counts.net_errors}`,
      `skipped=${counts.skipped}`,
      `crashes=${alive ? 0 : 1}`,
      `error_logs=${errorLines}`,
      `lag_p99_ms<=${lagP99.toFixed(1)}`,
      `healthz_p99_ms=${quantile(healthz, 0.99).toFixed(1)}`,
      `rate=${(counts.requests / seconds).toFixed(0)}/s`,
      ...phases.map((p) => p.summary),
      `seed=${SEED}`,
      ok ? "PASS" : "FAIL",
    ];
    process.stdout.write(row.join("  ") + "\n");
    for (const l of fiveXX) process.stdout.write(`  5xx: ${l}\n`);
    for (const p of phases) for (const l of p.notes) process.stdout.write(`  ${l}\n`);
    return ok ? 0 : 1;
  } finally {
    await Promise.all([...agents, probe].map((a) => a.close()));
    await d.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (e) => {
    process.stderr.write(`fuzz: ${(e as Error).stack ?? String(e)}\n`);
    process.exitCode = 1;
  },
);
