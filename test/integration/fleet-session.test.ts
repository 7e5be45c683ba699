// The fleet connection across drops, against a real mosquitto behind a relay the test cuts
// (the broker and its sessions stay up): a command published while the gateway is away is
// delivered when it is back and answered; a drop shorter than the will delay shows no
// offline status; retained status and devices are not sent again on reconnect; every
// attempt during the drop uses the one TLS context built at start.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { join } from "node:path";
import { rootCertificates } from "node:tls";
import { withTmpDir } from "../support/tmp.js";
import { startGateway, tcpDevice } from "../support/gateway.js";
import { withSite, tcpScenario } from "../support/site.js";
import { until } from "../support/wait.js";
import { command, fleetClient, fleetConfig, record, withBroker } from "../support/mosquitto.js";
import { startProxy } from "../support/tcp-proxy.js";
import type { Fleet } from "../../src/fleet/fleet.js";
import type { Part } from "../../src/lifecycle.js";

const T = "sitegate/site-001";
const tlsModule = createRequire(import.meta.url)("node:tls") as typeof import("node:tls");

/** Counts the TLS contexts built with a CA list of the system roots plus one (the fleet's ca_file). */
function countFleetContexts(): { count: () => number; restore: () => void } {
  const original = tlsModule.createSecureContext;
  let n = 0;
  tlsModule.createSecureContext = (opts) => {
    if (Array.isArray(opts?.ca) && opts.ca.length === rootCertificates.length + 1) n++;
    return original(opts);
  };
  return { count: () => n, restore: () => void (tlsModule.createSecureContext = original) };
}

test("a drop of the gateway's connection: the command sent meanwhile is answered after it is back, no offline status, no retained republish, one TLS context", async () => {
  await withTmpDir((dir) =>
    withBroker(dir, async (broker) => {
      const proxy = await startProxy(broker.port);
      const contexts = countFleetContexts();
      const sub = await fleetClient(broker);
      const got = record(sub);
      await sub.subscribeAsync(`${T}/status`, { qos: 1 });
      await sub.subscribeAsync(`${T}/devices`, { qos: 1 });
      const gw = await startGateway(join(dir, "gw"), {
        fleet: { ...fleetConfig(broker), url: `mqtts://127.0.0.1:${proxy.port}` },
        telemetry: { poll_interval_ms: 500, retention_max_mb: 64, commit_interval_s: 1 },
      });
      const fleet = gw.daemon.part<{ current: Fleet } & Part>("fleet").current;
      const retained = () => got.filter((m) => m.topic === `${T}/status` || m.topic === `${T}/devices`);
      try {
        await until(() => fleet.connected, "gateway connected");
        await until(() => got.some((m) => m.topic === `${T}/status` && m.json?.state === "online"), "birth", 30_000);
        // Its subscription follows the CONNACK: ping until it answers.
        await until(async () => (await command(sub, "site-001", "ping", undefined, 1000).catch(() => null)) !== null, "first ping");
        const before = retained().length;

        proxy.cut();
        await until(() => !fleet.connected, "the gateway notices the drop");
        const attempts = proxy.attempts;
        await until(() => proxy.attempts >= attempts + 3, "three refused attempts during the drop", 60_000);
        // Published at QoS 1 while the gateway is away: the broker keeps it in the gateway's session.
        const answer = command(sub, "site-001", "ping", undefined, 120_000);
        proxy.open();
        const a = await answer;
        assert.equal(a.json.status, 200, "the command sent during the drop ran");
        await until(() => fleet.connected, "connected again");

        assert.equal(got.filter((m) => m.topic === `${T}/status` && m.json?.state === "offline").length, 0, "no offline status");
        assert.equal(retained().length, before, "status and devices not sent again: nothing changed");
        assert.equal(fleet.stats().tls_contexts, 1);
        assert.equal(contexts.count(), 1, `one TLS context over ${fleet.stats().attempts} attempts`);
      } finally {
        contexts.restore();
        await gw.stop();
        await sub.endAsync();
        await proxy.close();
      }
    }),
  );
});

test("start-up: one status publish, one device view, however the first polls go", async () => {
  await withSite(tcpScenario(), (site) =>
    withTmpDir((dir) =>
      withBroker(dir, async (broker) => {
        const sub = await fleetClient(broker);
        const got = record(sub);
        await sub.subscribeAsync(`${T}/#`, { qos: 1 });
        const port = site.tcpPorts[0];
        const gw = await startGateway(join(dir, "gw"), {
          fleet: fleetConfig(broker),
          telemetry: { poll_interval_ms: 200, retention_max_mb: 64, commit_interval_s: 1 },
          devices: [tcpDevice("battery", port, 1), tcpDevice("grid", port, 3)] as never,
        });
        try {
          await until(() => got.filter((m) => m.topic === `${T}/telemetry`).length >= 10, "10 telemetry messages");
          const statuses = got.filter((m) => m.topic === `${T}/status`);
          assert.deepEqual(
            statuses.map((m) => `${m.json.state}/${m.json.devices}`),
            ["online/2"],
            "one status at start, with both devices",
          );
          assert.equal(got.filter((m) => m.topic === `${T}/devices`).length, 1, "one device view at start");
        } finally {
          await gw.stop();
          await sub.endAsync();
        }
      }),
    ),
  );
});
