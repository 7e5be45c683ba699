// The poller against the demo site over TCP and the pty: metrics follow the simulated
// site; every simulator fault marks only the faulty device offline, the others keep being
// polled, and the device comes back when the fault clears.
import { test } from "node:test";
import assert from "node:assert/strict";
import { withTmpDir } from "../support/tmp.js";
import { withSite, demoScenario, tcpScenario, type ScenarioInput } from "../support/site.js";
import { startGateway, tcpDevice, rtuDevice } from "../support/gateway.js";
import { until } from "../support/wait.js";
import type { SiteClock as Poller } from "../../src/telemetry/site-clock.js";
import type { SampleStore } from "../../src/telemetry/sample-store.js";
import type { Snapshot } from "../../src/telemetry/types.js";
import { tickOffsetMs } from "../../src/telemetry/tick-offset.js";

test("the poller reads every device, follows the site, and survives every fault", async () => {
  await withSite(demoScenario({ pv_irradiance: 0.5 }), async (site) => {
    await withTmpDir(async (dir) => {
      const port = site.tcpPorts[0];
      const gw = await startGateway(dir, {
        rtu_ports: { "1": site.rtuPeers[0] },
        telemetry: { poll_interval_ms: 250, retention_max_mb: 64, commit_interval_s: 1 },
        devices: [
          tcpDevice("battery", port, 1),
          tcpDevice("pv", port, 2),
          tcpDevice("grid", port, 3),
          rtuDevice("sdm", 10, "sdm630"),
          rtuDevice("relay", 11, "relay-coils"),
        ] as never,
      });
      const poller = gw.daemon.part<Poller>("poller");
      const samples = gw.daemon.part<SampleStore>("samples");
      const all = ["battery", "pv", "grid", "sdm", "relay"];
      const online = (id: string) => poller.health(id)?.online === true;
      const grid = () => poller.latest("grid")?.power_w ?? NaN;
      try {
        await until(() => all.every(online), "every device online");
        // base 2000 + relays 4 x 500 - PV 3000 = 1000 W import, read by both meters.
        await until(() => Math.abs(grid() - 1000) < 50, `grid near 1000 W (is ${grid()})`);
        assert.ok(Math.abs((poller.latest("sdm")?.power_w ?? NaN) - 1000) < 50);
        assert.ok(Math.abs((poller.latest("pv")?.power_w ?? NaN) - 3000) <= 31, "PV at half of 6 kW, within its 1 % noise");
        assert.equal(poller.latest("battery")?.soc_pct, 50);
        assert.equal(poller.latest("relay")?.state, 15);

        const health = await gw.call("GET", "/healthz");
        assert.equal(health.json.devices.online, 5);
        assert.deepEqual(health.json.devices.detail.map((d: { device_id: string }) => d.device_id).sort(), [...all].sort());

        // The site changes; the metrics follow.
        await fetch(`${site.controlUrl}/site`, { method: "POST", body: JSON.stringify({ base_load_w: 3500 }) });
        await fetch(`${site.controlUrl}/devices/relay`, { method: "POST", body: JSON.stringify({ coils: [false, false, true, true] }) });
        await until(() => Math.abs(grid() - 1500) < 50, `grid near 1500 W (is ${grid()})`);
        await until(() => poller.latest("relay")?.state === 12, "relay state 0b1100");

        // Every fault: only the faulty device goes offline; it recovers when cleared.
        const faults = [
          { device: "pv", fault: "no_answer" },
          { device: "pv", fault: "exception", code: 4 },
          { device: "pv", fault: "delay", delay_ms: 1500 },
          { device: "pv", fault: "drop" },
          { device: "pv", fault: "crc" },
          { device: "sdm", fault: "crc" },
          { device: "sdm", fault: "no_answer" },
          { device: "relay", fault: "exception", code: 6 },
        ] as const;
        for (const f of faults) {
          site.setFault(f);
          await until(() => !online(f.device), `${f.device} offline under ${f.fault}`);
          const others = all.filter((d) => d !== f.device);
          const before = new Map(others.map((d) => [d, poller.health(d)!.last_ok_at]));
          await until(
            () => others.every((d) => poller.health(d)!.last_ok_at !== before.get(d)),
            `the others polled during ${f.fault} on ${f.device}`,
          );
          assert.ok(others.every(online), `others online during ${f.fault}: ${others.filter((d) => !online(d))}`);
          const h = (await gw.call("GET", "/healthz")).json.devices.detail.find((d: { device_id: string }) => d.device_id === f.device);
          assert.equal(h.online, false);
          assert.ok(h.consecutive_failures >= 1 && typeof h.last_error === "string", JSON.stringify(h));
          site.clearFaults();
          await until(() => online(f.device), `${f.device} back after ${f.fault}`, 20000);
        }

        // Snapshots: one per tick of the site clock for every bus, stamped with the tick
        // time, never empty; a device at most once per tick.
        const snaps = samples.pending(10_000);
        assert.ok(snaps.length > 10);
        assert.ok(
          snaps.some((s) => s.devices.some((d) => d.device_id === "grid")) &&
            snaps.some((s) => s.devices.some((d) => d.device_id === "sdm")),
        );
        const seen = new Set<string>();
        for (const s of snaps) {
          assert.equal(s.ts % 250, tickOffsetMs("site-001", 250), "stamped with a tick of the site clock (its offset included)");
          assert.ok(s.devices.length > 0);
          for (const d of s.devices) {
            assert.ok(Object.keys(d.metrics).length > 0);
            assert.ok(!seen.has(`${s.ts} ${d.device_id}`), `${d.device_id} twice in tick ${s.ts}`);
            seen.add(`${s.ts} ${d.device_id}`);
          }
        }
        for (let i = 1; i < snaps.length; i++) assert.ok(snaps[i].id > snaps[i - 1].id);
      } finally {
        await gw.stop();
      }
    });
  });
});

test("a failing device is backed off (1, 2, 4 ... ticks) while the others keep every tick", async () => {
  await withSite(tcpScenario(), async (site) => {
    await withTmpDir(async (dir) => {
      const port = site.tcpPorts[0];
      const gw = await startGateway(dir, {
        telemetry: { poll_interval_ms: 100, retention_max_mb: 64, commit_interval_s: 1 },
        devices: [tcpDevice("grid", port, 3), tcpDevice("pv", port, 2)] as never,
      });
      const poller = gw.daemon.part<Poller>("poller");
      const samples = gw.daemon.part<SampleStore>("samples");
      const requests = async (name: string) =>
        ((await (await fetch(`${site.controlUrl}/state`)).json()) as { devices: Record<string, { requests: number }> }).devices[name]
          .requests;
      try {
        await until(() => poller.health("grid")?.online === true && poller.health("pv")?.online === true, "both devices polled");
        // Every snapshot from here on, as the store gets it.
        const seen: Snapshot[] = [];
        const append = samples.append.bind(samples);
        samples.append = (s: Snapshot) => {
          seen.push(s);
          append(s);
        };
        // It answers every request at once with an exception (a timeout would hold the shared
        // TCP connection and skip the battery's ticks too).
        site.setFault({ device: "pv", fault: "exception", code: 4 });
        await until(() => poller.health("pv")?.online === false, "pv offline");
        const before = await requests("pv");
        const ticks = poller.stats.ticks;
        await until(() => poller.stats.ticks >= ticks + 40, "40 more ticks", 30_000);
        // Backed off 1, 2, 4, 8, 16 ticks: 5 or 6 tries in 40 ticks, not 40.
        const tries = (await requests("pv")) - before;
        assert.ok(tries >= 3 && tries <= 7, `${tries} requests to the failing pv in 40 ticks`);

        // The healthy device on the same connection kept its tick.
        const grid = seen.map((s) => s.devices.find((d) => d.device_id === "grid")?.metrics).filter((m) => m?.power_w !== undefined);
        assert.ok(grid.length >= 35, `${grid.length} grid meter readings in 40 ticks`);
      } finally {
        await gw.stop();
      }
    });
  });
});

test("slow points (energy counters) are read on their own interval, power points every tick", async () => {
  const scenario: ScenarioInput = {
    seed: 5,
    control: { listen: "127.0.0.1:0" },
    site: { base_load_w: 1500, load_noise_pct: 0 },
    ports: [{ kind: "tcp", listen: "127.0.0.1:0", devices: [{ unit: 10, model: "sdm630", name: "sdm" }] }],
  };
  await withSite(scenario, async (site) => {
    await withTmpDir(async (dir) => {
      const gw = await startGateway(dir, {
        telemetry: { poll_interval_ms: 100, retention_max_mb: 64, commit_interval_s: 1 },
        devices: [tcpDevice("sdm", site.tcpPorts[0], 10, "sdm630")] as never,
      });
      const poller = gw.daemon.part<Poller>("poller");
      const samples = gw.daemon.part<SampleStore>("samples");
      const seen: Array<Record<string, number>> = [];
      const append = samples.append.bind(samples);
      samples.append = (s: Snapshot) => {
        const m = s.devices.find((d) => d.device_id === "sdm")?.metrics;
        if (m) seen.push(m);
        append(s);
      };
      try {
        await until(() => seen.length >= 30, "30 readings of the meter", 30_000);
        assert.equal(typeof poller.latest("sdm")?.energy_import_wh, "number", "the counters were read");
        assert.ok(
          seen.every((m) => typeof m.power_w === "number"),
          "power in every reading",
        );
        // The profile's slow interval is 60 s: in 3 s of readings the counters come at most once.
        const withEnergy = seen.filter((m) => "energy_import_wh" in m).length;
        assert.ok(withEnergy <= 1, `energy in ${withEnergy} of ${seen.length} readings`);
      } finally {
        await gw.stop();
      }
    });
  });
});
