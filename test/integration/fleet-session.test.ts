// The fleet connection across drops, against a real mosquitto behind a relay the test cuts
// (the broker and its sessions stay up): a command published while the gateway is away is
// delivered when it is back and answered; a drop shorter than the will delay shows no
// offline status; the retained device view is not sent again on reconnect, the status once;
// every attempt during the drop uses the one TLS context built at start. And the broker itself
// restarted (its persistence keeps the gateway's session): a command sent after it is back,
// while the gateway is still away, is delivered and answered, and the retained status the
// broker keeps ends online (mosquitto 2.0 publishes the Will when it shuts down cleanly,
// whatever its delay; the gateway's status on reconnecting puts it right).
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
/**
 * A gateway whose fleet link runs through a relay to the broker (so a test can drop or hold
 * it), and a subscriber recording the site's status and device view.
 */
async function proxiedGateway(dir: string, broker: Parameters<typeof fleetConfig>[0]) {
  const proxy = await startProxy(broker.port);
  const sub = await fleetClient(broker);
  const got = record(sub);
  await sub.subscribeAsync(`${T}/status`, { qos: 1 });
  await sub.subscribeAsync(`${T}/devices`, { qos: 1 });
  const gw = await startGateway(join(dir, "gw"), {
    fleet: { ...fleetConfig(broker), url: `mqtts://127.0.0.1:${proxy.port}` },
    telemetry: { poll_interval_ms: 500, retention_max_mb: 64, commit_interval_s: 1 },
  });
  const fleet = gw.daemon.part<{ current: Fleet } & Part>("fleet").current;
  return { proxy, sub, got, gw, fleet };
}

function countFleetContexts(): { count: () => number; restore: () => void } {
  const original = tlsModule.createSecureContext;
  let n = 0;
  tlsModule.createSecureContext = (opts) => {
    if (Array.isArray(opts?.ca) && opts.ca.length === rootCertificates.length + 1) n++;
    return original(opts);
  };
  return { count: () => n, restore: () => void (tlsModule.createSecureContext = original) };
}

test("a drop of the gateway's connection: the command sent meanwhile is answered after it is back, no offline status, the device view not sent again, one TLS context", async () => {
  await withTmpDir((dir) =>
    withBroker(dir, async (broker) => {
      const contexts = countFleetContexts();
      const { proxy, sub, got, gw, fleet } = await proxiedGateway(dir, broker);
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
        // The device view is not sent again (nothing changed); the status is, once per connection
        // (a broker may have published the Will meanwhile: the restart test below).
        await until(() => retained().length > before, "the status after the reconnect");
        assert.deepEqual(
          retained()
            .slice(before)
            .map((m) => `${m.topic.slice(T.length + 1)}/${m.json?.state}`),
          ["status/online"],
          "one status, no device view",
        );
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

test("a broker restart: the session survives it, a command sent while the gateway is still away is answered, the retained status ends online, the device view is not sent again", async () => {
  await withTmpDir((dir) =>
    withBroker(dir, async (broker) => {
      // The relay only keeps the gateway away after the restart, until the command is queued.
      const { proxy, sub, got, gw, fleet } = await proxiedGateway(dir, broker);
      // What the gateway published (a resubscription's retained copies carry the retain flag;
      // an offline status is the broker's, the Will).
      const published = () =>
        got.filter((m) => !m.retain && m.json?.state !== "offline" && (m.topic === `${T}/status` || m.topic === `${T}/devices`));
      try {
        await until(() => fleet.connected, "gateway connected");
        await until(() => got.some((m) => m.topic === `${T}/status` && m.json?.state === "online"), "birth", 30_000);
        await until(async () => (await command(sub, "site-001", "ping", undefined, 1000).catch(() => null)) !== null, "first ping");
        const before = published().length;
        const connects = fleet.stats().connects;

        await broker.stop();
        proxy.cut();
        await until(() => !fleet.connected, "the gateway notices the restart");
        await broker.start();
        await until(() => sub.connected, "the fleet's client is back", 30_000);
        // QoS 1, after the restart, before the gateway is back: only its persisted session can take it.
        const answer = command(sub, "site-001", "ping", undefined, 120_000);
        await until(async () => (await sub.subscribeAsync(`${T}/nothing`, { qos: 1 })) !== undefined, "the command is at the broker");
        proxy.open();
        const a = await answer;
        assert.equal(a.json.status, 200, "the command sent while the gateway was away ran");
        await until(() => fleet.connected && fleet.stats().connects > connects, "connected again");

        // Whatever the broker did with the Will, the gateway's last word is online; the device view stays as the broker kept it.
        const statuses = () => got.filter((m) => m.topic === `${T}/status`).map((m) => m.json?.state);
        await until(() => statuses().at(-1) === "online" && published().length > before, "online again");
        assert.deepEqual(
          published()
            .slice(before)
            .map((m) => `${m.topic.slice(T.length + 1)}/${m.json?.state}`),
          ["status/online"],
          `one status, no device view (statuses seen: ${statuses().join(", ")})`,
        );
        // A fleet client that looks now reads what the broker kept across its restart.
        const late = await fleetClient(broker);
        const kept = record(late);
        try {
          await late.subscribeAsync(`${T}/status`, { qos: 1 });
          await late.subscribeAsync(`${T}/devices`, { qos: 1 });
          await until(() => kept.length >= 2, "the retained status and devices");
          assert.equal(kept.find((m) => m.topic === `${T}/status`)?.json?.state, "online");
          assert.ok(kept.some((m) => m.topic === `${T}/devices`));
        } finally {
          await late.endAsync();
        }
      } finally {
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
