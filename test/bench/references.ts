// Bare references for the API benchmarks. Each does the same kind of work as the daemon's
// path with none of sitegate's code (what the libraries and the runtime cost on their own),
// and carries the checks every product route carries, so that no ratio is won by removing
// one: the same TLS certificate, the source-IP allowlist (a BlockList of the same CIDRs,
// checked per request) and the X-API-Key hook (a constant-time compare with the configured
// key), both in an onRequest hook before the body is read. bareDrServer runs in a child
// process (in-child.ts) under the same node flags as the daemon it is compared with.
import { mkdirSync } from "node:fs";
import { timingSafeEqual } from "node:crypto";
import { BlockList, isIPv4 } from "node:net";
import { join } from "node:path";
import Database from "better-sqlite3";
import Fastify, { type FastifyInstance } from "fastify";
import type { Server } from "node:https";
import { testCert } from "../support/tls.js";

/** What the references check: the test config's allowlist and API key (test/support/config.ts). */
export interface RefGuard {
  allowlist: string[];
  apiKey: string;
}

/** A fastify HTTPS instance with the test certificate and the allowlist and X-API-Key hook. */
export function guardedFastify(guard: RefGuard): FastifyInstance<Server> {
  const cert = testCert();
  const allow = new BlockList();
  for (const cidr of guard.allowlist) {
    const [addr = "", bits] = cidr.split("/");
    allow.addSubnet(addr, Number(bits), isIPv4(addr) ? "ipv4" : "ipv6");
  }
  const want = Buffer.from(guard.apiKey);
  const app = Fastify({ https: { key: cert.key, cert: cert.cert } });
  app.addHook("onRequest", async (req, reply) => {
    const v4 = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(req.ip)?.[1];
    const ok = v4 ? allow.check(v4, "ipv4") : allow.check(req.ip, isIPv4(req.ip) ? "ipv4" : "ipv6");
    if (!ok) return reply.code(403).send({ error: "forbidden" });
    const key = req.headers["x-api-key"];
    const got = typeof key === "string" ? Buffer.from(key) : Buffer.alloc(0);
    if (got.length !== want.length || !timingSafeEqual(got, want)) return reply.code(401).send({ error: "unauthorized" });
  });
  return app;
}

/**
 * The /dr reference: guardedFastify's route that parses the same JSON body, commits one
 * row per event in one SQLite transaction (WAL, synchronous=FULL, as receipts are
 * committed before the answer) and answers the same receipts. No validation of the events.
 */
export async function bareDrServer(arg: { dir: string; path: string; guard: RefGuard }): Promise<{ port: number; stop(): Promise<void> }> {
  mkdirSync(arg.dir, { recursive: true });
  const db = new Database(join(arg.dir, "bare-dr.db"));
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = FULL");
  db.exec("CREATE TABLE IF NOT EXISTS ev (event_id TEXT PRIMARY KEY, spec TEXT NOT NULL, created_at INTEGER NOT NULL) WITHOUT ROWID");
  const put = db.prepare("INSERT OR REPLACE INTO ev (event_id, spec, created_at) VALUES (?, ?, ?)");
  type Slot = { event_id: string };
  const commit = db.transaction((slots: Slot[], now: number) => {
    for (const s of slots) put.run(s.event_id, JSON.stringify(s), now);
  });
  const app = guardedFastify(arg.guard);
  app.post(arg.path, async (req) => {
    const slots = (req.body as { event_slots: Slot[] }).event_slots;
    commit(slots, Date.now());
    return slots.map((e) => ({ event_id: e.event_id, status: "accepted" }));
  });
  await app.listen({ host: "127.0.0.1", port: 0 });
  return {
    port: (app.server.address() as { port: number }).port,
    async stop() {
      await app.close();
      db.close();
    },
  };
}

/** The node flags this process runs under (the check that a reference gets the daemon's). */
export async function nodeFlags(): Promise<string[]> {
  return process.execArgv;
}
