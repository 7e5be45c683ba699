// Telemetry as the partner reads it, from the real simulator to a real HTTPS sink: float32
// readings arrive at the 7 significant digits the register carries (the same value in the
// poller and the store), a relay's coils arrive as `state` (coil 1 = bit 0) and follow the
// coils, and a device with nothing to report is left out of the push, never sent as `{}`.
import { test } from "node:test";
import assert from "node:assert/strict";
import { withSite, type ScenarioInput } from "../support/site.js";
import { withTmpDir } from "../support/tmp.js";
import { startGateway, tcpDevice } from "../support/gateway.js";
import { startSink, type SinkRequest, partnerTo } from "../support/partner-sink.js";
import { until } from "../support/wait.js";
import type { SiteClock as Poller } from "../../src/telemetry/site-clock.js";
import type { SampleStore } from "../../src/telemetry/sample-store.js";
import type { Snapshot } from "../../src/telemetry/types.js";

type Pushed = { device_id: string; metrics: Record<string, number> };

/**
 * No load noise and no generation: the grid is 2000 W plus 500 W per closed coil. With all
 * four coils closed, 4000 W, a third of it per phase: 1333.333... W, which a float32 holds
 * as 1333.3333740234375. The "dark" meter answers, but every reading is NaN.
 */
const scenario: ScenarioInput = {
  seed: 3,
  control: { listen: "127.0.0.1:0" },
  site: { base_load_w: 2000, load_noise_pct: 0 },
  ports: [
    {
      kind: "tcp",
      listen: "127.0.0.1:0",
      devices: [
        { unit: 10, model: "sdm630", name: "sdm" },
        { unit: 11, model: "relay", name: "relay", coils: 4, load_per_coil_w: 500 },
        { unit: 12, model: "sdm630", name: "dark" },
      ],
    },
  ],
};

test("float readings arrive rounded, relay coils arrive as state and follow the coils, a device with nothing to report is not sent", async () => {
  const sink = await startSink();
  try {
    await withSite(scenario, async (site) => {
      const control = (name: string, body: unknown) =>
        fetch(`${site.controlUrl}/devices/${name}`, { method: "POST", body: JSON.stringify(body) }).then((r) =>
          assert.equal(r.status, 200),
        );
      await control("dark", { nan: true });
      await withTmpDir(async (dir) => {
        const port = site.tcpPorts[0];
        const gw = await startGateway(dir, {
          partner: partnerTo(sink, { headers: [] }),
          telemetry: { poll_interval_ms: 250, retention_max_mb: 64, commit_interval_s: 1 },
          devices: [
            tcpDevice("sdm", port, 10, "sdm630"),
            tcpDevice("relay", port, 11, "relay-coils"),
            tcpDevice("dark", port, 12, "sdm630"),
          ] as never,
        });
        const poller = gw.daemon.part<Poller>("poller");
        const samples = gw.daemon.part<SampleStore>("samples");
        // What the poller hands to the store, snapshot by snapshot.
        const stored: Snapshot[] = [];
        const append = samples.append.bind(samples);
        samples.append = (s: Snapshot) => {
          stored.push(structuredClone(s));
          append(s);
        };
        const pushes = () => sink.accepted("/v1/telemetry");
        const devicesOf = (r: SinkRequest) => r.body.devices as Pushed[];
        const pushed = (id: string) =>
          pushes().flatMap((r) =>
            devicesOf(r)
              .filter((d) => d.device_id === id)
              .map((d) => d.metrics),
          );
        const lastState = () => pushed("relay").at(-1)?.state;
        try {
          // The dark meter pairs (its serial number is readable) and answers every poll.
          await until(() => ["sdm", "relay", "dark"].every((id) => poller.health(id)?.online === true), "every device polled");

          // The SDM630: a third of 4000 W per phase, as the register carries it.
          await sink.waitFor(() => pushed("sdm").some((m) => m.power_l1_w !== undefined), 15000, "a push with the meter");
          const sdm = pushed("sdm")[0];
          assert.equal(sdm.power_l1_w, 1333.333, JSON.stringify(sdm));
          assert.equal(sdm.power_w, 4000);
          assert.equal(sdm.voltage_v, 230);
          // |1333.333 W| / 230 V = 5.797101... A: 7 significant digits, not a float32's 5.797101497650146.
          assert.equal(sdm.current_a, 5.797101);
          for (const m of pushed("sdm")) {
            for (const [k, v] of Object.entries(m))
              assert.equal(v, Number(v.toPrecision(7)), `sdm ${k} = ${v} has more than 7 significant digits`);
          }
          // The same value for the store and the status page (the poller's latest).
          assert.equal(poller.latest("sdm")?.power_l1_w, 1333.333);
          assert.ok(stored.some((s) => s.devices.some((d) => d.device_id === "sdm" && d.metrics.power_l1_w === 1333.333)));

          // The relay: every coil closed is state 15 (coil 1 = bit 0 ... coil 4 = bit 3).
          await sink.waitFor(() => lastState() !== undefined, 15000, "a push with the relay");
          assert.equal(pushed("relay")[0].state, 15);
          assert.deepEqual(Object.keys(pushed("relay")[0]), ["state"]);
          // Coils 1 and 3 closed: 0b0101.
          await control("relay", { coils: [true, false, true, false] });
          await sink.waitFor(() => lastState() === 5, 15000, "relay state 5 at the partner");
          // Coils 1 to 3 closed: 0b0111. That is not SunSpec St 7 (fault): the relay's op mode stays 0.
          await control("relay", { coils: [true, true, true, false] });
          await sink.waitFor(() => lastState() === 7, 15000, "relay state 7 at the partner");
          assert.equal(poller.latest("relay")?.state, 7);
          assert.equal(poller.health("relay")?.op_mode, 0, "a relay's coil bit mask is not read as an inverter state");
          // And the meter saw the loads go: 2000 + 3 x 500 W.
          await sink.waitFor(() => pushed("sdm").at(-1)?.power_w === 3500, 15000, "the meter following the coils");

          // The dark meter: polled all along, never in a snapshot, never pushed, no `{}` anywhere.
          const polled = poller.health("dark")!.last_ok_at;
          const from = stored.length;
          await until(
            () => stored.length >= from + 4 && poller.health("dark")!.last_ok_at !== polled,
            "four more snapshots, the dark meter polled again",
          );
          const through = stored.length;
          await sink.waitFor(() => pushes().length >= through, 15000, "the pushes of every stored snapshot");
          assert.equal(poller.health("dark")?.online, true);
          assert.deepEqual(poller.latest("dark"), {});
          for (const s of stored) {
            assert.ok(!s.devices.some((d) => d.device_id === "dark"), `the dark meter in the snapshot of ${s.ts}`);
            for (const d of s.devices) assert.ok(Object.keys(d.metrics).length > 0, `${d.device_id} with no metrics at ${s.ts}`);
          }
          for (const r of pushes()) {
            assert.ok(!devicesOf(r).some((d) => d.device_id === "dark"), "the dark meter is never pushed");
            assert.ok(!/"metrics":\{\}/.test(r.raw), r.raw);
          }
        } finally {
          await gw.stop();
        }
      });
    });
  } finally {
    await sink.stop();
  }
});
