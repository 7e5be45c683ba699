// ConnectionGate (src/api/connection-gate.ts) with sockets as plain emitters and a clock the
// test moves: a source on no allowlist never holds a slot, one log line a minute names the
// refused sources, and a full listener gives a newcomer the biggest holder's oldest idle slot.
import { test } from "node:test";
import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import { Writable } from "node:stream";
import type { Server } from "node:https";
import type { Socket } from "node:net";
import { ConnectionGate } from "../../src/api/connection-gate.js";
import { connectionLimits } from "../../src/api/connection-limits.js";
import { createLogger } from "../../src/log.js";

class FakeSocket extends EventEmitter {
  destroyed = false;
  constructor(readonly remoteAddress: string) {
    super();
  }
  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    queueMicrotask(() => this.emit("close"));
  }
}

function setup(limits: { perSource: number; total: number }) {
  let now = 1_000_000;
  const lines: Array<Record<string, unknown>> = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
      done();
    },
  });
  const log = createLogger({ pretty: false, destination, level: "info" });
  const allowed = (ip: string) => ip === "127.0.0.1" || ip.startsWith("10.");
  const gate = new ConnectionGate(connectionLimits(limits), log, "api", allowed, () => now);
  const server = new EventEmitter() as unknown as Server;
  const handed: FakeSocket[] = [];
  server.on("connection", (s: Socket) => handed.push(s as unknown as FakeSocket));
  gate.install(server);
  const connect = (ip: string) => {
    const s = new FakeSocket(ip);
    server.emit("connection", s);
    return s;
  };
  /** A request on the socket, as the https server hands it on (its TLS socket's _parent). */
  const request = (s: FakeSocket) => {
    const res = new EventEmitter();
    server.emit("request", { socket: { _parent: s } }, res);
    return () => res.emit("close");
  };
  const metric = (name: string, labels: Record<string, string>) =>
    gate
      .metrics()
      .find((m) => m.name === name)!
      .values.find((v) => Object.entries(labels).every(([k, x]) => v.labels?.[k] === x))?.value;
  return { connect, request, handed, lines, metric, advance: (ms: number) => (now += ms) };
}

test("sources on no allowlist are destroyed before the server sees them; one line a minute names them", async () => {
  const g = setup({ perSource: 64, total: 512 });
  const refused = Array.from({ length: 8 * 64 }, (_, i) => g.connect(`127.0.0.${2 + (i % 8)}`));
  assert.ok(refused.every((s) => s.destroyed));
  assert.equal(g.handed.length, 0);
  assert.equal(g.metric("sitegate_http_connections_refused_total", { reason: "not_allowed" }), 512);
  assert.equal(g.lines.length, 1, "one line for the whole flood");
  assert.equal(g.lines[0]!.sources, "127.0.0.2 (1)");
  g.advance(60_000);
  g.connect("127.0.0.9");
  assert.equal(g.lines.length, 2);
  // Everything refused since the first line, with the refusal that wrote this one.
  assert.match(String(g.lines[1]!.sources), /^127\.0\.0\.3 \(64\), .*127\.0\.0\.9 \(65\), 127\.0\.0\.2 \(63\)$/);
  const ok = g.connect("127.0.0.1");
  assert.ok(!ok.destroyed);
  assert.deepEqual(g.handed, [ok]);
});

test("a full listener: the newcomer takes the biggest holder's oldest idle slot; a source as big as the rest is refused", async () => {
  const g = setup({ perSource: 4, total: 8 });
  const a = Array.from({ length: 4 }, () => g.connect("10.0.0.1"));
  const b = Array.from({ length: 3 }, () => g.connect("10.0.0.2"));
  const c = g.connect("10.0.0.3");
  const done = g.request(a[0]!); // a's oldest is busy
  assert.equal(g.handed.length, 8);
  const near = g.connect("10.0.0.2"); // holds 3, the biggest 4: no churn
  assert.ok(near.destroyed);
  assert.equal(g.metric("sitegate_http_connections_refused_total", { reason: "total" }), 1);
  const newcomer = g.connect("127.0.0.1");
  assert.ok(!newcomer.destroyed);
  assert.deepEqual(
    a.map((s) => s.destroyed),
    [false, true, false, false],
    "the oldest idle one of the biggest holder",
  );
  assert.ok(b.every((s) => !s.destroyed) && !c.destroyed);
  assert.equal(g.metric("sitegate_http_connections_evicted_total", {}), 1);
  await new Promise((r) => setImmediate(r));
  assert.equal(g.metric("sitegate_http_connections", {}), 8, "the evicted slot counted once");
  done();
  // Everyone holds at most 3 now but 10.0.0.2: a newcomer from 10.0.0.3 (1) takes a slot of 10.0.0.1 (3) or 10.0.0.2 (3).
  const again = g.connect("10.0.0.3");
  assert.ok(!again.destroyed);
  assert.equal(g.metric("sitegate_http_connections_evicted_total", {}), 2);
});
