// One site clock for every bus: the readings of one tick from two TCP hosts form one
// snapshot and one data push stamped with the tick time; a device that is not fully
// configured is polled (health, latest values) but never pushed.
import { test } from "node:test";
import assert from "node:assert/strict";
import { withSite, type ScenarioInput } from "../support/site.js";
import { withTmpDir } from "../support/tmp.js";
import { startGateway, tcpDevice } from "../support/gateway.js";
import { startSink, partnerTo } from "../support/partner-sink.js";
import { until } from "../support/wait.js";
import type { SiteClock as Poller } from "../../src/telemetry/site-clock.js";
import type { DeviceRegistry } from "../../src/modbus/device/registry.js";
import { tickOffsetMs } from "../../src/telemetry/tick-offset.js";

const INTERVAL = 500;

function twoHosts(): ScenarioInput {
  return {
    seed: 7,
    control: { listen: "127.0.0.1:0" },
    site: { base_load_w: 2000, load_noise_pct: 0, pv_irradiance: 0.5 },
    ports: [
      {
        kind: "tcp",
        listen: "127.0.0.1:0",
        devices: [
          { unit: 1, model: "sunspec-storage", name: "battery", max_power_w: 5000, capacity_wh: 10000, soc_pct: 50 },
          { unit: 2, model: "sunspec-pv", name: "pv", max_power_w: 6000 },
        ],
      },
      {
        kind: "tcp",
        listen: "127.0.0.1:0",
        devices: [
          { unit: 3, model: "sunspec-meter", name: "grid" },
          { unit: 4, model: "sunspec-meter", name: "grid2" },
        ],
      },
    ],
  } as ScenarioInput;
}

test("every bus polls on one site tick: one payload per tick across two TCP hosts, a not fully configured device left out", async () => {
  const sink = await startSink();
  try {
    await withSite(twoHosts(), async (site) => {
      await withTmpDir(async (dir) => {
        const [a, b] = site.tcpPorts;
        const gw = await startGateway(dir, {
          partner: partnerTo(sink, { headers: [] }),
          telemetry: { poll_interval_ms: INTERVAL, retention_max_mb: 64, commit_interval_s: 1 },
          devices: [
            tcpDevice("battery", a, 1),
            tcpDevice("pv", a, 2),
            tcpDevice("grid", b, 3),
            // 40088 is read-only: the check write fails, REGISTRY_WRITE_FAILED.
            tcpDevice("grid2", b, 4, "sunspec", { mb_check_write: [{ reg_cmd_id: 1, reg_fun: 6, reg_reg: 40088, reg_value: 1 }] }),
          ] as never,
        });
        try {
          const poller = gw.daemon.part<Poller>("poller");
          const registry = gw.daemon.part<DeviceRegistry>("registry");
          await until(() => registry.list().length === 4, "all four devices registered");
          assert.equal(registry.list().find((d) => d.config.device_id === "grid2")?.fully_configured, false);
          const full = (r: { body: { devices: Array<{ device_id: string }> } }) =>
            ["battery", "pv", "grid"].every((id) => r.body.devices.some((d) => d.device_id === id));
          await sink.waitFor(() => sink.accepted().filter(full).length >= 5, 30000, "five payloads with both hosts' devices");

          const pushes = sink.accepted("/v1/telemetry");
          for (const r of pushes) {
            const ts = Date.parse(r.body.timestamp);
            assert.equal(
              ts % INTERVAL,
              tickOffsetMs("site-001", INTERVAL),
              `${r.body.timestamp} is a tick of the site clock (its offset included)`,
            );
            assert.ok(
              !r.body.devices.some((d: { device_id: string }) => d.device_id === "grid2"),
              "the not fully configured device is never pushed",
            );
          }
          // A device is read once per tick: never twice under one timestamp (a bus that
          // finished after its tick's deadline comes as its own payload with that tick's time).
          const seen = new Set<string>();
          for (const r of pushes)
            for (const d of r.body.devices as Array<{ device_id: string }>) {
              const k = `${r.body.timestamp} ${d.device_id}`;
              assert.ok(!seen.has(k), `${k} twice`);
              seen.add(k);
            }

          // Still polled: health and latest values, with the tick of its latest reading.
          await until(() => poller.health("grid2")?.online === true, "grid2 polled");
          assert.ok(typeof poller.latest("grid2")?.power_w === "number");
          const at = poller.latestAt("grid2");
          assert.ok(at !== undefined && at % INTERVAL === tickOffsetMs("site-001", INTERVAL), `latestAt ${at} is a tick time`);
          assert.ok(Math.abs(at - (poller.latestAt("grid") ?? 0)) <= INTERVAL, "read on the same clock as the others");
        } finally {
          await gw.stop();
        }
      });
    });
  } finally {
    await sink.stop();
  }
});
