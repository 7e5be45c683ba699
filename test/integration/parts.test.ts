// The daemon as a list of parts: one part's failure stays that part's. A snapshot listener
// that throws (the status page's) does not stop the sample store or dispatch measurement;
// the first listener of the sample store's, the delivery log's and the registry's
// announcements throwing does not stop the fleet hearing them; a part that cannot start
// (the status page's own listener, on a port in use) is reported and retried while polling
// goes on.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:net";
import { join } from "node:path";
import { assertMeasuredDelivery, event, makeRig, rigConfig, siteScenario, waitPaired, withDispatchRig } from "../support/dispatch.js";
import { startGateway, tcpDevice, withSiteGateway } from "../support/gateway.js";
import { command, fleetClient, fleetConfig, record, withBroker } from "../support/mosquitto.js";
import { startSink } from "../support/partner-sink.js";
import { withSite } from "../support/site.js";
import { withTmpDir } from "../support/tmp.js";
import { until } from "../support/wait.js";
import type { Uplink } from "../../src/uplink/uplink.js";
import type { ConfigInput } from "../../src/config/schema.js";
import type { UiPart } from "../../src/ui/part.js";
import type { SampleStore } from "../../src/telemetry/sample-store.js";
import type { ModbusPolling } from "../../src/modbus/device/polling.js";

const metric = (text: string, line: string) =>
  text
    .split("\n")
    .find((l) => l.startsWith(line + " "))
    ?.slice(line.length + 1);

test("the status page's snapshot listener throws on every snapshot: samples are still stored and a dispatch event is measured", async () => {
  await withDispatchRig({}, async (rig) => {
    const ui = rig.gw.daemon.part<UiPart>("ui");
    // The status page sits between the sample store and dispatch on the snapshot event.
    ui.observe = () => {
      throw new Error("the chart history broke");
    };
    const samples = rig.gw.daemon.part<SampleStore>("samples");
    const stored = samples.stats().stored_samples_total;
    const ev = event({ event_type: "discharge", event_quantity: 2, event_unit: "kW" }, 1500, 4000);
    assert.equal((await rig.dr({ mode: "live", event_slots: [ev] })).status, 200);
    const body = await rig.waitResponse(ev.event_id);
    assertMeasuredDelivery(body, 2);
    assert.ok(samples.stats().stored_samples_total > stored, "snapshots kept being stored");
    assert.ok(rig.gw.daemon.events.failureCount("ui", "snapshot") > 5, "the listener did run and throw");
    const text = (await rig.gw.call("GET", "/metrics")).text;
    assert.ok(Number(metric(text, 'sitegate_event_listener_failures_total{part="ui",event="snapshot"}')) > 5, text);
  });
});

test("the uplink's listeners throw on every announcement: the fleet still publishes telemetry, event states and the device view", async () => {
  const sink = await startSink();
  try {
    await withSite(siteScenario(), (site) =>
      withTmpDir((dir) =>
        withBroker(dir, async (broker) => {
          // The PV inverter is left out of the config, to be configured once the listeners throw.
          const config = { ...rigConfig(site, sink, ["battery"], { pv: false }), fleet: fleetConfig(broker) };
          const gw = await startGateway(join(dir, "gw"), config);
          const cl = await fleetClient(broker);
          const got = record(cl);
          try {
            await cl.subscribeAsync("sitegate/site-001/#", { qos: 1 });
            await waitPaired(gw, 3);
            // Each of these is the first listener of its event; the fleet's come after them.
            const fail = () => {
              throw new Error("listener broke");
            };
            const uplink = gw.daemon.part<Uplink>("uplink");
            uplink.samplesAppended = fail;
            uplink.messagesAppended = fail;
            const since = got.length;
            const after = () => got.slice(since);

            await until(() => after().filter((m) => m.topic === "sitegate/site-001/telemetry").length >= 3, "telemetry goes on");
            const ev = event({ event_type: "discharge", event_quantity: 1, event_unit: "kW" }, 3000, 2000);
            assert.equal((await makeRig(site, gw, sink, dir).dr({ mode: "live", event_slots: [ev] })).status, 200);
            await until(
              () => after().some((m) => m.topic === "sitegate/site-001/events" && m.json?.event_id === ev.event_id),
              "the event's state on the events topic",
            );
            const pv = tcpDevice("pv", site.tcpPorts[0], 10, "sunspec", { mb_device_type: 2 });
            assert.equal((await command(cl, "site-001", "configure", { devices: [pv] })).json.status, 200);
            await until(
              () => after().some((m) => m.topic === "sitegate/site-001/devices" && m.json?.devices?.length === 4),
              "the device view with the PV inverter",
            );
            for (const [part, name] of [
              ["uplink", "samples_appended"],
              ["uplink", "messages_appended"],
            ] as const)
              assert.ok(gw.daemon.events.failureCount(part, name) > 0, `${part} ${name} did run and throw`);
          } finally {
            await cl.endAsync();
            await gw.stop();
          }
        }),
      ),
    );
  } finally {
    await sink.stop();
  }
});

/** A port taken by another listener until release() is called. */
async function takenPort(): Promise<{ port: number; release(): Promise<void> }> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  return { port, release: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

test("a part that cannot start is shown in /healthz and /metrics, polling goes on, and it starts once it can", async () => {
  const taken = await takenPort();
  let released = false;
  try {
    await withSiteGateway(
      { seed: 1, ports: [{ kind: "tcp", listen: "127.0.0.1:0", devices: [{ unit: 1, model: "sunspec-meter", name: "grid" }] }] },
      (site) => ({
        devices: [tcpDevice("grid", site.tcpPorts[0], 1, "sunspec")] as ConfigInput["devices"],
        ui: { enabled: true, listen: `127.0.0.1:${taken.port}` },
      }),
      async (_site, gw) => {
        const health = (await gw.call("GET", "/healthz")).json;
        assert.equal(health.status, "ok");
        const warning = health.warnings.find((w: { code: string }) => w.code === "part_not_running");
        assert.match(
          warning?.message ?? "",
          /^ui is not running after 1 failed start \(.*EADDRINUSE.*\); retrying$/,
          JSON.stringify(health.warnings),
        );
        const text = (await gw.call("GET", "/metrics")).text;
        assert.equal(metric(text, 'sitegate_part_up{part="ui"}'), "0");
        assert.equal(metric(text, 'sitegate_part_up{part="poller"}'), "1");
        const poller = gw.daemon.part<ModbusPolling>("modbus-polling");
        const reads = poller.stats.reads_ok;
        await until(() => poller.stats.reads_ok > reads + 1, "polling goes on");

        await taken.release();
        released = true;
        await until(
          async () => metric((await gw.call("GET", "/metrics")).text, 'sitegate_part_up{part="ui"}') === "1",
          "the status page started on a retry",
          15_000,
        );
        assert.equal(gw.daemon.part<UiPart>("ui").port, taken.port);
        assert.deepEqual((await gw.call("GET", "/healthz")).json.warnings, []);
      },
    );
  } finally {
    if (!released) await taken.release();
  }
});
