// With batched telemetry commits (commit_interval_s 10), the status page's API shows a new
// reading as soon as the poll that took it, and the partner push carries it, before it is
// committed: they read memory, not telemetry.db. The grid meter's reading changes when the
// simulator's site load changes; the test waits for the first snapshot that shows it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { request } from "undici";
import { tcpDevice, withSiteGateway } from "../support/gateway.js";
import { tcpScenario } from "../support/site.js";
import { uiAgent, uiSession } from "../support/ui-session.js";
import { startSink, partnerTo } from "../support/partner-sink.js";
import { until } from "../support/wait.js";
import type { SampleStore } from "../../src/telemetry/sample-store.js";

const agent = uiAgent;

test("commit_interval_s 10: the status page and the partner push show a new reading at the poll that took it, before any commit", async () => {
  const sink = await startSink();
  try {
    await withSiteGateway(
      tcpScenario(),
      (site) => ({
        ui: { enabled: true },
        partner: partnerTo(sink, { headers: [] }),
        telemetry: { poll_interval_ms: 500, retention_max_mb: 64, commit_interval_s: 10 },
        devices: [tcpDevice("grid", site.tcpPorts[0], 3)] as never,
      }),
      async (site, gw) => {
        const samples = gw.daemon.part<SampleStore>("samples");
        const cookie = await uiSession(gw.url);
        const gridOnPage = async (): Promise<number | undefined> => {
          const r = await request(`${gw.url}/ui/api/devices`, { headers: { cookie }, dispatcher: agent });
          const body = (await r.body.json()) as { devices: Array<{ device_id: string; metrics: Record<string, number> }> };
          return body.devices.find((d) => d.device_id === "grid")?.metrics.power_w;
        };
        await until(async () => (await gridOnPage()) !== undefined, "a first reading on the status page");
        await until(() => samples.stats().committed_snapshots_total > 0, "the first commit", 30_000);

        // A new site load; the next snapshots show it. Catch the first one that does, and the
        // commits so far, at the moment it is taken.
        const before = (await gridOnPage())!;
        const want = before + 5000;
        await fetch(`${site.controlUrl}/site`, { method: "POST", body: JSON.stringify({ base_load_w: 12_000, load_noise_pct: 0 }) });
        let seen: { id: number; power: number; committed: number } | null = null;
        gw.daemon.events.on("samples_appended", "test", () => {
          const [snap] = samples.pending(1, samples.stats().push_cursor + samples.stats().pending_snapshots - 1);
          const power = snap?.devices.find((d) => d.device_id === "grid")?.metrics.power_w;
          if (!seen && power !== undefined && power > want)
            seen = { id: snap.id, power, committed: samples.stats().committed_snapshots_total };
        });
        try {
          await until(() => seen !== null, "a snapshot with the new load", 15_000);
        } finally {
          gw.daemon.events.off("test");
        }
        const taken = seen!;
        assert.ok(
          taken.committed < taken.id,
          `snapshot ${taken.id} was not yet committed (${taken.committed} committed) when it was taken`,
        );
        // The status page shows it now: it reads the poller's memory, not telemetry.db.
        const shown = await gridOnPage();
        assert.ok(
          shown !== undefined && shown > want,
          `the status page shows the new load (${shown} W, was ${before} W), with the next commit up to 10 s away`,
        );
        // The partner push carries it too (the push reads held snapshots as well).
        await until(
          () =>
            sink
              .accepted()
              .some(
                (r) =>
                  ((r.body as { devices: Array<{ device_id: string; metrics: Record<string, number> }> }).devices.find(
                    (d) => d.device_id === "grid",
                  )?.metrics.power_w ?? 0) > want,
              ),
          "the partner gets the new reading",
          15_000,
        );
      },
    );
  } finally {
    await sink.stop();
  }
});
