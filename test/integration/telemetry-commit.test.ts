// Batched telemetry commits (SD card wear): with telemetry.commit_interval_s 10, snapshots
// wait in memory and go into SQLite in one transaction per 10 s. A kill -9 loses at most
// that interval of samples and never an acknowledged receipt, event state or push cursor
// (a settled cursor may be persisted up to one interval late: what the partner had is then
// sent again under the same Idempotency-Key, so it counts once). The daemon runs as a child
// process under the unit's node flags; the database is read from the test.
import { test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { Agent, request } from "undici";
import { withTmpDir } from "../support/tmp.js";
import { withSite, tcpScenario } from "../support/site.js";
import { tcpDevice } from "../support/gateway.js";
import { TEST_API_KEY } from "../support/config.js";
import { spawnDaemon } from "../support/daemon-process.js";
import { daemonMetric, dbValue, readTelemetry } from "../support/db.js";
import { until } from "../support/wait.js";
import { startSink, partnerTo } from "../support/partner-sink.js";
import { event } from "../support/dispatch.js";

const POLL_MS = 500;

/** Posts one event to the daemon's /dr and expects its receipts (200). */
async function postDr(url: string, mode: "live" | "test", ev: ReturnType<typeof event>): Promise<void> {
  const agent = new Agent({ connect: { rejectUnauthorized: false } });
  try {
    const r = await request(`${url}/v1/api/gateway/site-001/dr`, {
      method: "POST",
      headers: { "x-api-key": TEST_API_KEY, "content-type": "application/json" },
      body: JSON.stringify({ mode, event_slots: [ev] }),
      dispatcher: agent,
    });
    assert.equal(r.statusCode, 200, await r.body.text());
  } finally {
    await agent.close();
  }
}
const COMMIT_S = 10;

test("commit_interval_s 10: snapshots are committed in batches; a kill -9 loses at most 10 s of samples and no receipt", async () => {
  await withSite(tcpScenario(), async (site) => {
    await withTmpDir(async (dir) => {
      const data = join(dir, "data");
      const d = await spawnDaemon(dir, {
        telemetry: { poll_interval_ms: POLL_MS, retention_max_mb: 64, commit_interval_s: COMMIT_S },
        devices: [tcpDevice("battery", site.tcpPorts[0], 1), tcpDevice("grid", site.tcpPorts[0], 3)] as never,
      });
      // telemetry.db is the running daemon's alone: what it has committed, from /metrics.
      const stored = () => daemonMetric(d.url, "sitegate_samples_committed_snapshots_total");
      try {
        // The first batch: about 20 snapshots of 0.5 s at once, not one row per poll.
        await until(async () => (await stored()) > 0, "the first batch", 30_000);
        const first = await stored();
        assert.ok(first >= COMMIT_S / (POLL_MS / 1000) / 2, `${first} snapshots in the first commit`);
        // Between commits nothing is added, though the poller runs.
        const t = Date.now();
        await until(async () => (await stored()) > first, "the second batch", 30_000);
        assert.ok(Date.now() - t > 2000, "the next rows came with the next batch, not poll by poll");

        // An acknowledged receipt is committed before its answer, whatever the telemetry interval.
        const ev = event({ event_quantity: 1 }, 3_600_000, 3_600_000);
        await postDr(d.url, "test", ev);

        const killedAt = Date.now();
        d.child.kill("SIGKILL");
        await new Promise((res) => (d.alive() ? d.child.once("exit", res) : res(null)));
        const newest = readTelemetry(data, (db) => db.prepare("SELECT max(ts) FROM tm_snapshot").pluck().get() as number);
        assert.ok(
          killedAt - newest <= COMMIT_S * 1000 + 2 * POLL_MS,
          `the newest stored snapshot is ${killedAt - newest} ms older than the kill`,
        );
        assert.equal(dbValue<number>(data, "SELECT count(*) FROM dp_event WHERE event_id = ?", ev.event_id), 1, "the receipt survives");
      } finally {
        await d.stop();
      }
    });
  });
});

test("commit_interval_s 10: after a kill -9 a running event is still running and the partner gets every stored snapshot, a repeat only under its first key", async () => {
  const sink = await startSink();
  try {
    await withSite(tcpScenario(), async (site) => {
      await withTmpDir(async (dir) => {
        const data = join(dir, "data");
        const over = {
          telemetry: { poll_interval_ms: POLL_MS, retention_max_mb: 64, commit_interval_s: COMMIT_S },
          partner: partnerTo(sink, { timeout_ms: 1000 }),
          devices: [tcpDevice("battery", site.tcpPorts[0], 1), tcpDevice("grid", site.tcpPorts[0], 3)] as never,
        };
        let d = await spawnDaemon(dir, over);
        try {
          // A committed batch and pushes the partner acknowledged.
          await until(async () => (await daemonMetric(d.url, "sitegate_samples_committed_snapshots_total")) > 0, "the first batch", 30_000);
          await until(() => sink.accepted().filter((r) => r.path.endsWith("telemetry")).length >= 5, "acknowledged pushes", 30_000);
          // A live event that starts now: its state change to running is committed before it acts.
          const ev = event({ event_quantity: 1 }, 500, 3_600_000);
          await postDr(d.url, "live", ev);
          const state = () => dbValue<string>(join(data, "sitegate.db"), "SELECT state FROM dp_event WHERE event_id = ?", ev.event_id);
          await until(() => state() === "running", "the event running", 20_000);

          d.child.kill("SIGKILL");
          await new Promise((res) => (d.alive() ? d.child.once("exit", res) : res(null)));
          assert.equal(state(), "running", "the running state survives the kill");
          const stored = readTelemetry(data, (db) =>
            (db.prepare("SELECT ts FROM tm_snapshot ORDER BY id").pluck().all() as number[]).map((t) => new Date(t).toISOString()),
          );
          const pushes = () => sink.accepted().filter((q) => q.path.endsWith("telemetry"));
          const keyOf = new Map<string, string>();
          for (const q of pushes()) keyOf.set(q.body.timestamp as string, String(q.headers["idempotency-key"]));
          const before = pushes().length;

          d = await spawnDaemon(dir, over);
          await until(
            () => stored.every((ts) => pushes().some((q) => q.body.timestamp === ts)),
            "every snapshot stored at the kill at the partner",
            30_000,
          );
          for (const q of pushes().slice(before)) {
            const first = keyOf.get(q.body.timestamp as string);
            if (first !== undefined)
              assert.equal(q.headers["idempotency-key"], first, `snapshot ${q.body.timestamp} sent again under another key`);
          }
          assert.equal(state(), "running", "the restarted daemon goes on with the event");
        } finally {
          await d.stop();
        }
      });
    });
  } finally {
    await sink.stop();
  }
});
