// kill -9 of `sitegate run` mid-stream and a restart lose no committed sample: every
// snapshot in the database when the process died reaches the partner afterwards.
import { test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { withTmpDir } from "../support/tmp.js";
import { withSite, tcpScenario } from "../support/site.js";
import { startSink, partnerTo } from "../support/partner-sink.js";
import { spawnDaemon, stopDaemon, writeConfig } from "../support/cli.js";
import { daemonMetric, readTelemetry } from "../support/db.js";
import { freePort } from "../support/net.js";
import { testConfigInput } from "../support/config.js";
import { tcpDevice } from "../support/gateway.js";
import { until } from "../support/wait.js";

test("kill -9 mid-stream and a restart lose no committed sample", async () => {
  const sink = await startSink();
  try {
    await withSite(tcpScenario(), async (site) => {
      await withTmpDir(async (dir) => {
        const port = site.tcpPorts[0];
        const base = testConfigInput(join(dir, "data"));
        const api = `127.0.0.1:${await freePort()}`;
        const cfg = {
          ...base,
          http: { ...base.http, listen: api },
          log_level: "warn",
          partner: partnerTo(sink, { timeout_ms: 1000 }),
          telemetry: { poll_interval_ms: 200, retention_max_mb: 64, commit_interval_s: 1 },
          devices: [tcpDevice("battery", port, 1), tcpDevice("grid", port, 3)],
        };
        const file = writeConfig(dir, cfg);
        let child = spawnDaemon(file);
        try {
          await until(() => sink.accepted().length >= 5, "live pushes", 20000);
          await sink.refuse(); // the partner goes away; the backlog builds up in SQLite
          // A commit per poll (commit_interval_s 1): pending snapshots are committed ones.
          const count = () => daemonMetric(`https://${api}`, "sitegate_samples_pending_snapshots");
          await until(async () => (await count()) >= 15, "a backlog of snapshots", 20000);
          await stopDaemon(child, "SIGKILL");
          const { committed, dbg } = readTelemetry(join(dir, "data"), (db) => ({
            committed: (db.prepare("SELECT ts FROM tm_snapshot ORDER BY id").pluck().all() as number[]).map((t) =>
              new Date(t).toISOString(),
            ),
            dbg: {
              cursor: db.prepare("SELECT value FROM tm_state WHERE key='push_cursor'").pluck().get(),
              rows: db.prepare("SELECT id, ts FROM tm_snapshot ORDER BY id LIMIT 3").all(),
            },
          }));
          const before = new Set(sink.accepted().map((r) => r.body.timestamp as string));
          await sink.accept();
          child = spawnDaemon(file);
          const received = () => new Set(sink.accepted().map((r) => r.body.timestamp as string));
          await until(
            () => committed.every((ts) => received().has(ts) || before.has(ts)),
            "every committed snapshot at the partner",
            30000,
          ).catch((e) => {
            const missing = committed.filter((ts) => !received().has(ts) && !before.has(ts));
            throw new Error(
              `${(e as Error).message}: ${missing.length} of ${committed.length} missing, e.g. ${missing.slice(0, 3)}; sink got ${sink.requests.length} requests, last ${sink.requests.at(-1)?.body?.timestamp}; db ${JSON.stringify(dbg)}; sink statuses ${sink.requests.map((r) => r.status + ":" + r.body?.timestamp?.slice(17, 23)).join(" ")}`,
            );
          });
          // Order: the backlog arrives oldest first, give or take the 4 pushes in flight.
          const after = sink
            .accepted()
            .map((r) => r.body.timestamp as string)
            .filter((ts) => committed.includes(ts) && !before.has(ts));
          const firstSeen = [...new Set(after)];
          const sorted = [...firstSeen].sort();
          firstSeen.forEach((ts, i) => assert.ok(Math.abs(sorted.indexOf(ts) - i) < 4, `${ts} arrived as number ${i}, not oldest first`));
        } finally {
          await stopDaemon(child, "SIGKILL");
        }
      });
    });
  } finally {
    await sink.stop();
  }
});
