// Data push and outbox against a real HTTPS partner sink: exact headers and body,
// outages of every kind, restarts, retention.
import { test } from "node:test";
import assert from "node:assert/strict";
import { withTmpDir } from "../support/tmp.js";
import { until } from "../support/wait.js";
import { snapshot, startUplink } from "../support/uplink-harness.js";
import { startSink } from "../support/partner-sink.js";
import type { PartnerSink, SinkRequest } from "../support/partner-sink.js";
import { HTTPS, queueCallback } from "../../src/uplink/callbacks.js";

const seqOf = (r: SinkRequest) => (r.body.devices[0].metrics.power_w as number) / 10;

/**
 * Every accepted push, deduplicated by Idempotency-Key, must be 0..n-1, each once. With 4
 * in flight and retries they may arrive out of order (settle order does not matter to
 * the partner); what the store guarantees is that nothing is missing and nothing is
 * skipped by the cursor.
 */
function assertAll(sink: PartnerSink, n: number): void {
  const seen = new Map<string, number>();
  for (const r of sink.accepted("/v1/telemetry"))
    if (!seen.has(r.headers["idempotency-key"] as string)) seen.set(r.headers["idempotency-key"] as string, seqOf(r));
  assert.deepEqual(
    [...seen.values()].sort((a, b) => a - b),
    Array.from({ length: n }, (_, i) => i),
    "every snapshot once",
  );
}

test("a data push carries the partner's headers, a stable Idempotency-Key and the snapshot as spec 2.6", async () => {
  const sink = await startSink();
  try {
    await withTmpDir(async (dir) => {
      const rig = await startUplink(dir, sink);
      try {
        const snap = snapshot(7, 2, Date.UTC(2026, 10, 22, 9, 30, 0, 125));
        rig.samples.append(snap);
        await sink.waitFor(() => sink.requests.length >= 1);
        const [r] = sink.requests;
        assert.equal(r.method, "POST");
        assert.equal(r.path, "/v1/telemetry");
        assert.equal(r.headers["content-type"], "application/json");
        assert.equal(r.headers["x-partner-key"], "k-123");
        assert.equal(r.headers["x-trace"], "bench");
        assert.match(String(r.headers["user-agent"]), /^sitegate\/\d+\.\d+\.\d+$/);
        assert.match(String(r.headers["idempotency-key"]), /^[0-9a-f-]{36}$/);
        assert.deepEqual(r.body, {
          timestamp: "2026-11-22T09:30:00.125Z",
          site_id: "site-001",
          devices: [
            { device_id: "dev-0", metrics: { power_w: 70, soc_pct: 50, energy_import_wh: 100007 } },
            { device_id: "dev-1", metrics: { power_w: 71, soc_pct: 50.1, energy_import_wh: 100007 } },
          ],
        });
      } finally {
        await rig.stop();
      }
    });
  } finally {
    await sink.stop();
  }
});

for (const outage of ["status 500", "timeout", "refused"] as const) {
  test(`a partner that ${outage === "refused" ? "refuses connections" : outage === "timeout" ? "times out" : "answers 500"} for a while then recovers receives every sample`, async () => {
    const sink = await startSink();
    try {
      await withTmpDir(async (dir) => {
        const rig = await startUplink(dir, sink, { timeoutMs: 300 });
        try {
          for (let i = 0; i < 5; i++) rig.samples.append(snapshot(i));
          await sink.waitFor(() => sink.accepted().length >= 5);
          if (outage === "status 500") sink.mode = { kind: "status", status: 500 };
          else if (outage === "timeout") sink.mode = { kind: "hang" };
          else await sink.refuse();
          const before = sink.requests.length;
          for (let i = 5; i < 25; i++) rig.samples.append(snapshot(i));
          // The outage is seen: failed attempts counted (and, where the partner is reached at
          // all, received by it: answered 500 or held until the client's timeout).
          await until(() => rig.uplink.stats().data_push.failures >= 2, "two failed attempts counted");
          if (outage !== "refused") await sink.waitFor(() => sink.requests.length > before, 10000, "a failed attempt at the sink");
          else assert.equal(sink.requests.length, before, "a refusing partner receives nothing");
          assert.ok(rig.samples.stats().pending_snapshots >= 15, "the backlog waits in the store");
          if (outage === "refused") await sink.accept();
          sink.mode = { kind: "ok" };
          await sink.waitFor(() => new Set(sink.accepted().map((r) => r.headers["idempotency-key"])).size >= 25, 20000, "the backlog");
          assertAll(sink, 25);
          await until(() => rig.samples.stats().pending_snapshots === 0, "the cursor over all of them");
          // Retries of one message reuse its key: every failed attempt's key was later accepted.
          const acceptedKeys = new Set(sink.accepted().map((r) => r.headers["idempotency-key"]));
          const failed = sink.requests.filter((r) => r.status < 200 || r.status >= 300);
          if (outage !== "refused") assert.ok(failed.length >= 1, "the sink saw failed attempts");
          for (const r of failed)
            assert.ok(
              acceptedKeys.has(r.headers["idempotency-key"]),
              `a failed attempt's key (status ${r.status}) is retried until accepted`,
            );
          // Back to live pushing.
          rig.samples.append(snapshot(25));
          await sink.waitFor(() => sink.accepted().some((r) => seqOf(r) === 25));
        } finally {
          await rig.stop();
        }
      });
    } finally {
      await sink.stop();
    }
  });
}

test("a restart loses no committed sample and re-sends nothing the partner settled twice over", async () => {
  const sink = await startSink();
  try {
    await withTmpDir(async (dir) => {
      let rig = await startUplink(dir, sink);
      for (let i = 0; i < 10; i++) rig.samples.append(snapshot(i));
      await sink.waitFor(() => sink.accepted().length >= 10);
      await sink.refuse();
      for (let i = 10; i < 30; i++) rig.samples.append(snapshot(i));
      await rig.stop();
      // A new process on the same database.
      await sink.accept();
      rig = await startUplink(dir, sink);
      try {
        for (let i = 30; i < 35; i++) rig.samples.append(snapshot(i));
        await sink.waitFor(() => new Set(sink.accepted().map((r) => r.headers["idempotency-key"])).size >= 35);
        assertAll(sink, 35);
        assert.equal(sink.accepted().length, 35, "a clean stop persisted the cursor: nothing sent twice");
      } finally {
        await rig.stop();
      }
    });
  } finally {
    await sink.stop();
  }
});

test("outbox messages are committed, sent with their own key, and survive a restart until a 200", async () => {
  const sink = await startSink();
  try {
    await withTmpDir(async (dir) => {
      sink.mode = { kind: "status", status: 503 };
      let rig = await startUplink(dir, sink);
      const { idempotency_key } = queueCallback(rig.uplink.deliveryLog, "execution_response", `${sink.url}/exec`, {
        event_id: "e-1",
        status: "completed",
      });
      await sink.waitFor(() => sink.requests.length >= 2, 10000, "two failed attempts");
      await rig.stop();
      sink.mode = { kind: "ok" };
      rig = await startUplink(dir, sink);
      try {
        await sink.waitFor(() => sink.accepted("/exec").length === 1);
        const keys = sink.requests.map((r) => r.headers["idempotency-key"]);
        assert.ok(
          keys.every((k) => k === idempotency_key),
          "one key across every retry and the restart",
        );
        assert.deepEqual(sink.accepted("/exec")[0].body, { event_id: "e-1", status: "completed" });
        await until(() => rig.uplink.deliveryLog.size(HTTPS) === 0, "the accepted message settled (deleted from the outbox)");
      } finally {
        await rig.stop();
      }
    });
  } finally {
    await sink.stop();
  }
});

test("a full buffer drops the oldest unsent samples, counts them, and keeps the newest", async () => {
  const sink = await startSink();
  try {
    await withTmpDir(async (dir) => {
      await sink.refuse();
      const rig = await startUplink(dir, sink, { retentionBytes: 20_000 });
      try {
        for (let i = 0; i < 400; i++) rig.samples.append(snapshot(i, 10));
        const st = rig.samples.stats();
        assert.ok(st.dropped_samples > 0, "samples were dropped");
        assert.ok(st.bytes <= 20_000, `buffer ${st.bytes} bytes over its bound`);
        assert.equal(st.dropped_samples % 30, 0, "whole snapshots are dropped");
        const kept = rig.samples.pending(1000);
        assert.equal(kept.at(-1)!.devices[0].metrics.power_w, 3990, "the newest snapshot is kept");
        assert.equal(kept[0].id, kept.at(-1)!.id - kept.length + 1, "what is kept is contiguous: only the oldest went");
        const counted = rig.storage.telemetryDb.prepare("SELECT count(*) AS n, sum(length(data)) AS b FROM tm_snapshot").get() as {
          n: number;
          b: number;
        };
        assert.equal(st.snapshots, counted.n, "the in-memory row count matches the table");
        assert.equal(st.pending_snapshots, kept.length);
        assert.ok(st.bytes >= counted.b && st.bytes <= counted.b + 64 * counted.n, "the size estimate follows the table");
        await sink.accept();
        await sink.waitFor(() => sink.accepted().length >= kept.length, 20000, "the kept backlog");
        assert.equal(seqOf(sink.accepted()[0]), kept[0].devices[0].metrics.power_w / 10);
      } finally {
        await rig.stop();
      }
    });
  } finally {
    await sink.stop();
  }
});

test("snapshot ids are never reused after the sent ones are deleted", async () => {
  const sink = await startSink();
  try {
    await withTmpDir(async (dir) => {
      const rig = await startUplink(dir, sink);
      try {
        rig.samples.append(snapshot(0));
        await sink.waitFor(() => sink.accepted().length === 1);
        await until(() => rig.samples.stats().pending_snapshots === 0, "the push settled");
        rig.samples.persistCursor(); // deletes the sent row
        assert.equal(rig.samples.stats().snapshots, 0, "the table is empty now");
        assert.equal(rig.storage.telemetryDb.prepare("SELECT count(*) FROM tm_snapshot").pluck().get(), 0);
        rig.samples.append(snapshot(1));
        await sink.waitFor(() => sink.accepted().length === 2, 5000, "the second snapshot");
        assert.notEqual(sink.accepted()[0].headers["idempotency-key"], sink.accepted()[1].headers["idempotency-key"]);
        assert.equal(seqOf(sink.accepted()[1]), 1);
      } finally {
        await rig.stop();
      }
    });
  } finally {
    await sink.stop();
  }
});
