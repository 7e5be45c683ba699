// Connection limits of both HTTPS listeners (DESIGN B3), against the real daemon over real
// TLS sockets from several loopback source addresses: a request trickled byte by byte is
// closed at its time limit (a body after an early 401 too), an idle keep-alive connection is
// closed, and connections over the per-source or the total count are destroyed at accept
// while another source is still served. The timeouts are shortened through
// DaemonOptions.connectionLimits; each wait below ends on the server's own close, and the
// bound around it only turns a connection that is never closed into a failure.
import { test } from "node:test";
import assert from "node:assert/strict";
import { connect, type ConnectionOptions, type TLSSocket } from "node:tls";
import { Agent, request } from "undici";
import type { ConnectionLimits } from "../../src/api/connection-limits.js";
import type { ConfigInput } from "../../src/config/schema.js";
import type { UiPart } from "../../src/ui/part.js";
import { withTmpDir } from "../support/tmp.js";
import { startGateway, type Gateway } from "../support/gateway.js";
import { testCert } from "../support/tls.js";
import { TEST_API_KEY } from "../support/config.js";

const QUICK: Partial<ConnectionLimits> = { requestTimeoutMs: 800, idleMs: 400, checkIntervalMs: 100 };
/** Far above every limit under test: a connection still open then is never closed by the server. */
const NEVER_MS = 15_000;
const LOOPBACK_8 = { metrics_allow: ["127.0.0.0/8"] };

async function withLimits(
  limits: Partial<ConnectionLimits>,
  over: (dir: string) => Partial<ConfigInput>,
  fn: (gw: Gateway) => Promise<void>,
): Promise<void> {
  await withTmpDir(async (dir) => {
    const gw = await startGateway(dir, over(dir), { connectionLimits: limits });
    try {
      await fn(gw);
    } finally {
      await gw.stop();
    }
  });
}

interface Conn {
  socket: TLSSocket;
  /** Resolves once the socket is closed, with what the server sent and whether TLS ever came up. */
  closed: Promise<{ data: string; secure: boolean }>;
  /** Resolves once TLS is up, or rejects when the connection ends before. */
  secured: Promise<void>;
}

function open(url: string, from = "127.0.0.1"): Conn {
  const u = new URL(url);
  const opts: ConnectionOptions = { host: u.hostname, port: Number(u.port), ca: testCert().cert, checkServerIdentity: () => undefined };
  const socket = connect({ ...opts, localAddress: from } as ConnectionOptions);
  let data = "";
  let secure = false;
  socket.on("data", (d: Buffer) => (data += d.toString("latin1")));
  socket.on("error", () => {});
  const secured = new Promise<void>((resolve, reject) => {
    socket.once("secureConnect", () => {
      secure = true;
      resolve();
    });
    socket.once("close", () => reject(new Error(`closed before TLS came up (from ${from})`)));
  });
  secured.catch(() => {});
  const closed = new Promise<{ data: string; secure: boolean }>((resolve) => socket.once("close", () => resolve({ data, secure })));
  return { socket, closed, secured };
}

/** The server's close (the test never ends these sockets first), or a failure once NEVER_MS passed without one. */
async function closedByServer(c: Conn, what: string): Promise<{ data: string; secure: boolean }> {
  let timer: NodeJS.Timeout | undefined;
  const never = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: still open after ${NEVER_MS} ms`)), NEVER_MS);
  });
  try {
    return await Promise.race([c.closed, never]);
  } finally {
    clearTimeout(timer);
    c.socket.destroy();
  }
}

/** Writes one byte every `everyMs` until the socket closes. */
function trickle(c: Conn, everyMs = 50): void {
  const t = setInterval(() => c.socket.write("a"), everyMs); // the trickle's pace, not a wait
  c.socket.once("close", () => clearInterval(t));
}

const drHead = (key?: string) =>
  "POST /v1/api/gateway/site-001/dr HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n" +
  (key ? `X-API-Key: ${key}\r\n` : "") +
  "Content-Length: 100000\r\n\r\n";

test("a body trickled after an early 401 on /dr, a trickled body with a valid key and trickled headers are all closed at the time limit", async () => {
  await withLimits(
    QUICK,
    () => ({}),
    async (gw) => {
      const noKey = open(gw.url);
      const withKey = open(gw.url);
      const headers = open(gw.url);
      await Promise.all([noKey.secured, withKey.secured, headers.secured]);
      noKey.socket.write(drHead());
      withKey.socket.write(drHead(TEST_API_KEY));
      headers.socket.write("GET /healthz HTTP/1.1\r\n");
      for (const c of [noKey, withKey]) trickle(c);
      const h = setInterval(() => headers.socket.write("X-Slow: 1\r\n"), 50); // the trickle's pace, not a wait
      headers.socket.once("close", () => clearInterval(h));
      const [a, b, c] = await Promise.all([
        closedByServer(noKey, "trickled body after 401"),
        closedByServer(withKey, "trickled body"),
        closedByServer(headers, "trickled headers"),
      ]);
      assert.match(a.data, /^HTTP\/1\.1 401 /);
      assert.match(b.data, /^HTTP\/1\.1 408 /);
      assert.match(c.data, /^HTTP\/1\.1 408 /);
    },
  );
});

test("a connection that never sends a byte, or never finishes TLS, is closed at the time limit", async () => {
  await withLimits(
    QUICK,
    () => ({}),
    async (gw) => {
      const silent = open(gw.url);
      await silent.secured;
      const r = await closedByServer(silent, "silent connection");
      // Nothing, or a 408 (Node answers a request timeout with one when its check runs first): never anything else.
      assert.match(r.data, /^(HTTP\/1\.1 408 |$)/);
      const { Socket } = await import("node:net");
      const u = new URL(gw.url);
      const raw = new Socket();
      const closed = new Promise<void>((resolve) => raw.once("close", () => resolve()));
      raw.on("error", () => {});
      raw.connect(Number(u.port), u.hostname);
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        closed,
        new Promise((_, reject) => (timer = setTimeout(() => reject(new Error("TCP without a handshake: still open")), NEVER_MS))),
      ]);
      clearTimeout(timer);
    },
  );
});

test("an idle keep-alive connection is closed after the idle time", async () => {
  await withLimits(
    QUICK,
    () => ({}),
    async (gw) => {
      const c = open(gw.url);
      await c.secured;
      c.socket.write("GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n");
      const r = await closedByServer(c, "idle keep-alive");
      assert.match(r.data, /^HTTP\/1\.1 200 /);
      assert.match(r.data, /keep-alive: timeout=\d/i);
    },
  );
});

test("the status page's own listener has the same time limit", async () => {
  await withLimits(
    QUICK,
    () => ({ ui: { enabled: true, listen: "127.0.0.1:0" } }),
    async (gw) => {
      const ui = gw.daemon.part<UiPart>("ui");
      const c = open(ui.url);
      await c.secured;
      c.socket.write(
        "POST /ui/login HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 5000\r\n\r\n",
      );
      trickle(c);
      const r = await closedByServer(c, "trickled login");
      assert.match(r.data, /^HTTP\/1\.1 408 /);
    },
  );
});

/** `n` connections from `from`, each with TLS up (or refused: rejected). */
async function hold(url: string, from: string, n: number): Promise<Conn[]> {
  const conns = Array.from({ length: n }, () => open(url, from));
  await Promise.all(conns.map((c) => c.secured));
  return conns;
}

/** The server counts a close when its own close event runs, after the client's: asks again until then. */
async function eventually(ok: () => Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if (await ok()) return;
    await new Promise((r) => setTimeout(r, 20)); // polling the server's own count, not a timed assertion
  }
  assert.fail(`${what}: never came`);
}

async function healthzFrom(url: string, from: string): Promise<number> {
  const agent = new Agent({ connect: { ca: testCert().cert }, localAddress: from });
  try {
    const r = await request(`${url}/healthz`, { dispatcher: agent });
    await r.body.dump();
    return r.statusCode;
  } finally {
    await agent.close();
  }
}

test("the 65th connection from one source is refused at accept while another source still gets /healthz", async () => {
  // The real timeouts: the 64 held connections must outlive the test.
  await withLimits(
    {},
    () => ({ http: { listen: "127.0.0.1:0", tls: { cert: testCert().certFile, key: testCert().keyFile }, ...LOOPBACK_8 } }),
    async (gw) => {
      const held = await hold(gw.url, "127.0.0.2", 64);
      try {
        const extra = open(gw.url, "127.0.0.2");
        await assert.rejects(extra.secured, /closed before TLS/);
        assert.equal((await extra.closed).secure, false);
        assert.equal(await healthzFrom(gw.url, "127.0.0.3"), 200);
        const metrics = await gw.call("GET", "/metrics");
        assert.match(metrics.text, /sitegate_http_connections_refused_total\{listener="api",reason="per_source"\} 1\n/);
        // A held connection that closes frees its place.
        held.shift()!.socket.destroy();
        await eventually(async () => (await healthzFrom(gw.url, "127.0.0.2").catch(() => 0)) === 200, "a place for 127.0.0.2");
      } finally {
        for (const c of held) c.socket.destroy();
      }
    },
  );
});

test("sources on no allowlist never hold a slot: 8 × 64 connections from 127.0.0.2-9 are refused at accept and the allowlisted 127.0.0.1 gets /healthz", async () => {
  // The real limits (64 per source, 512 in all): before, these 512 took every slot.
  await withLimits(
    {},
    () => ({}),
    async (gw) => {
      const sources = Array.from({ length: 8 }, (_, i) => `127.0.0.${2 + i}`);
      const conns = sources.flatMap((from) => Array.from({ length: 64 }, () => open(gw.url, from)));
      try {
        const outcomes = await Promise.all(
          conns.map((c) =>
            c.secured.then(
              () => "tls",
              () => "refused",
            ),
          ),
        );
        assert.equal(outcomes.filter((o) => o === "refused").length, 512, "every one refused before TLS");
        assert.equal(await healthzFrom(gw.url, "127.0.0.1"), 200);
        const m = (await gw.call("GET", "/metrics")).text;
        assert.match(m, /sitegate_http_connections_refused_total\{listener="api",reason="not_allowed"\} 512\n/);
        assert.match(m, /sitegate_http_connections\{listener="api"\} [12]\n/, "only the allowlisted hold slots");
      } finally {
        for (const c of conns) c.socket.destroy();
      }
    },
  );
});

test("allowlisted sources holding every slot: a newcomer gets the oldest idle connection of the biggest holder; equal holders are refused, not churned", async () => {
  await withLimits(
    { perSource: 8, total: 24 },
    () => ({ http: { listen: "127.0.0.1:0", tls: { cert: testCert().certFile, key: testCert().keyFile }, ...LOOPBACK_8 } }),
    async (gw) => {
      const a = await hold(gw.url, "127.0.0.2", 8);
      const b = await hold(gw.url, "127.0.0.3", 8);
      const c = await hold(gw.url, "127.0.0.4", 7);
      // A request in progress makes a connection busy: 127.0.0.2's oldest is, so its second goes.
      // Node answers 100 Continue as it hands the request on; its body never comes.
      let seen = "";
      a[0]!.socket.on("data", (d: Buffer) => (seen += d.toString("latin1")));
      a[0]!.socket.write(
        "POST /nope HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: 10\r\n\r\n",
      );
      await eventually(async () => seen.includes("100 Continue"), "the request handed on");
      const held = [...a, ...b, ...c, ...(await hold(gw.url, "127.0.0.5", 1))];
      try {
        // Every slot taken. 127.0.0.4 holds 7, one fewer than the biggest: refused, not churned.
        const near = open(gw.url, "127.0.0.4");
        await assert.rejects(near.secured, /closed before TLS/);
        assert.equal(await healthzFrom(gw.url, "127.0.0.6"), 200, "the newcomer is served");
        const gone = await Promise.race(held.map((x, i) => x.closed.then(() => i)));
        assert.equal(gone, 1, "the biggest holder's oldest idle connection was closed");
        const text = (await gw.call("GET", "/metrics")).text;
        // The /metrics call itself may have taken a slot the same way.
        assert.match(text, /sitegate_http_connections_evicted_total\{listener="api"\} [12]\n/);
        assert.match(text, /reason="total"\} 1\n/);
      } finally {
        for (const x of held) x.socket.destroy();
      }
    },
  );
});

/** `n` requests pipelined on one connection; the status of each answer, in order. */
async function pipelined(url: string, path: string, n: number, headers = ""): Promise<number[]> {
  const c = open(url);
  await c.secured;
  c.socket.write(`GET ${path} HTTP/1.1\r\nHost: localhost\r\n${headers}\r\n`.repeat(n));
  let text = "";
  const statuses = () => [...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));
  await new Promise<void>((resolve, reject) => {
    c.socket.on("data", (d: Buffer) => {
      text += d.toString("latin1");
      if (statuses().length >= n) resolve();
    });
    c.socket.once("close", () => reject(new Error(`closed after ${statuses().length} answers of ${n}`)));
  });
  c.socket.destroy();
  return statuses();
}

test("unknown paths count against the per-source rate limit: 1,000 pipelined GET /nope get 429 beyond the limit, on both listeners", async () => {
  await withLimits(
    {},
    () => ({ ui: { enabled: true, listen: "127.0.0.1:0" } }),
    async (gw) => {
      // Two pipelines of 500 (Node's HTTP server closes a connection with far more pipelined at
      // at once). The limit counts a pipeline's requests together, so a few more than the
      // strict 400 may be refused; never fewer.
      const twice = async (url: string) => [...(await pipelined(url, "/nope", 500)), ...(await pipelined(url, "/nope", 500))];
      const tally = (ss: number[]) =>
        JSON.stringify(Object.fromEntries([...new Set(ss)].map((x) => [x, ss.filter((s) => s === x).length])));
      const api = await twice(gw.url);
      assert.ok(api.filter((s) => s === 429).length >= 400, `beyond the default 600 a minute: 429 (${tally(api)})`);
      assert.equal(api.filter((s) => s === 404 || s === 429).length, 1000, tally(api));
      const ui = await twice(gw.daemon.part<UiPart>("ui").url);
      assert.ok(ui.filter((s) => s === 429).length >= 400, `the status page's listener too (${tally(ui)})`);
      assert.equal(ui.filter((s) => s === 303 || s === 429).length, 1000, tally(ui));
    },
  );
});

test("the webhook guard's synchronous answers: 200 pipelined requests without a key, or for another site, are each answered (401, 404), none drops the connection", async () => {
  await withLimits(
    {},
    () => ({}),
    async (gw) => {
      const all = (ss: number[], status: number) => ss.length === 200 && ss.every((s) => s === status);
      const noKey = await pipelined(gw.url, "/v1/api/gateway/site-001/devicesync", 200);
      assert.ok(all(noKey, 401), `without a key: ${noKey.length} answers, ${[...new Set(noKey)]}`);
      // The right key: the first request checks it (scrypt), the connection then passes synchronously.
      assert.equal((await pipelined(gw.url, "/v1/api/gateway/site-001/devicesync", 1, `x-api-key: ${TEST_API_KEY}\r\n`))[0], 200);
      const otherSite = await pipelined(gw.url, "/v1/api/gateway/site-002/devicesync", 200, `x-api-key: ${TEST_API_KEY}\r\n`);
      assert.ok(otherSite.length === 200 && otherSite.every((s) => s === 404), `another site: ${otherSite.length} answers`);
    },
  );
});
