// Bare references that run in a child process (in-child.ts) under the same node flags as
// the daemon they are compared with. Each does the same kind of work as the daemon's path,
// with none of sitegate's code: what the libraries and the runtime cost on their own.
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import Fastify from "fastify";
import { testCert } from "../support/tls.js";

/**
 * The /dr reference: a bare fastify HTTPS route that parses the same JSON body, commits
 * one row per event in one SQLite transaction (WAL, synchronous=FULL, as receipts are
 * committed before the answer) and answers the same receipts. No auth, no validation.
 */
export async function bareDrServer(arg: { dir: string; path: string }): Promise<{ port: number; stop(): Promise<void> }> {
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
  const cert = testCert();
  const app = Fastify({ https: { key: cert.key, cert: cert.cert } });
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
