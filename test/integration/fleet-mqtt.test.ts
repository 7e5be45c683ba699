// The MQTT v5 fleet uplink against a real mosquitto (TLS, password file, the README's ACL)
// and real MQTT.js clients: birth and Last Will, retained status and device view,
// telemetry in order with the original timestamps, a broker outage that loses nothing,
// commands answered with the correlation data echoed, and bad commands refused while the
// connection stays up.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { withTmpDir } from "../support/tmp.js";
import { withSite, tcpScenario } from "../support/site.js";
import { startGateway, tcpDevice } from "../support/gateway.js";
import { testConfigInput } from "../support/config.js";
import { until } from "../support/wait.js";
import { event } from "../support/dispatch.js";
import type { ModbusPolling } from "../../src/modbus/device/polling.js";
import { startSink, partnerTo } from "../support/partner-sink.js";
import { spawnDaemon, stopDaemon, writeConfig } from "../support/cli.js";
import { daemonMetric, readTelemetry } from "../support/db.js";
import { freePort } from "../support/net.js";
import { spawnDaemon as spawnDaemonProcess } from "../support/daemon-process.js";
import { command, fleetClient, fleetConfig, record, withBroker, type Received } from "../support/mosquitto.js";
import { UNREACHABLE_WARN_MS, type Fleet } from "../../src/fleet/fleet.js";
import { systemClock } from "../../src/util/clock.js";

const T = "sitegate/site-001";
const tel = (got: Received[]) => got.filter((m) => m.topic === `${T}/telemetry`);

/** Telemetry timestamps (a snapshot's identity, with the site_id) in arrival order; a resend must repeat its content exactly. */
function distinctTimestamps(msgs: Received[]): string[] {
  const byTime = new Map<string, string>();
  for (const m of msgs) {
    const ts = m.json.timestamp as string;
    const seen = byTime.get(ts);
    if (seen !== undefined) assert.equal(seen, m.payload, "a resend carries the same content");
    else byTime.set(ts, m.payload);
  }
  return [...byTime.keys()];
}

test("birth, retained status and device view, telemetry oldest first with the original timestamps and no user properties", async () => {
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
          await until(() => got.some((m) => m.topic === `${T}/status` && m.json?.state === "online"), "birth message");
          const birth = got.find((m) => m.topic === `${T}/status`)!.json;
          assert.equal(birth.site_id, "site-001");
          assert.equal(typeof birth.version, "string");
          assert.equal(typeof birth.uptime_s, "number");
          assert.equal(typeof birth.running_events, "number");
          await until(() => got.some((m) => m.topic === `${T}/devices` && m.json?.devices?.length === 2), "device view with both devices");
          await until(() => tel(got).length >= 15, "15 telemetry messages");

          // A subscriber that comes later gets the retained status and device view.
          const late = await fleetClient(broker);
          const lg = record(late);
          await late.subscribeAsync(`${T}/+`, { qos: 1 });
          await until(
            () => lg.some((m) => m.topic === `${T}/status` && m.retain) && lg.some((m) => m.topic === `${T}/devices` && m.retain),
            "retained status and devices",
          );
          const st = lg.find((m) => m.topic === `${T}/status`)!;
          assert.equal(st.json.state, "online");
          assert.equal(st.json.devices, 2);
          const dv = lg.find((m) => m.topic === `${T}/devices`)!;
          assert.deepEqual(
            dv.json.devices.map((d: any) => d.device_id),
            ["battery", "grid"],
          );
          const sync = await gw.call("GET", "/v1/api/gateway/site-001/devicesync", { headers: gw.apiKeyHeaders });
          assert.deepEqual(dv.json, sync.json, "the device view is the device sync answer");
          await late.endAsync();
          const metrics = await gw.call("GET", "/metrics");
          assert.match(metrics.text, /sitegate_fleet_connected 1/);
          assert.match(metrics.text, /sitegate_fleet_acked_total\{stream="telemetry"\} [1-9]/);

          // Telemetry: the stored snapshots (the HTTPS partner is unreachable, so all are
          // still in the store), oldest first, each with its read time and its data-push key.
          const rows = gw.daemon.storage.telemetryDb.prepare("SELECT id, ts FROM tm_snapshot ORDER BY id").all() as Array<{
            id: number;
            ts: number;
          }>;
          const msgs = tel(got);
          assert.ok(rows.length >= msgs.length);
          msgs.forEach((m, i) => {
            assert.equal(m.json.timestamp, new Date(rows[i].ts).toISOString(), `message ${i} carries snapshot ${rows[i].id}'s time`);
            assert.equal(m.json.site_id, "site-001");
            assert.ok(m.json.devices.length >= 1);
            // Lean: no user properties and no content type (docs/fleet.md): site_id and timestamp are its identity.
            assert.equal(m.props?.userProperties, undefined);
            assert.equal(m.props?.contentType, undefined);
          });
        } finally {
          await gw.stop();
          await sub.endAsync();
        }
      }),
    ),
  );
});

test("Last Will: kill -9 of a `sitegate run` process leaves a retained offline status after the will delay", async () => {
  await withTmpDir((dir) =>
    withBroker(dir, async (broker) => {
      // A short will delay: the broker publishes the Last Will once it has passed without a reconnect.
      const cfg = { ...testConfigInput(join(dir, "data")), log_level: "warn", fleet: { ...fleetConfig(broker), will_delay_s: 1 } };
      const file = writeConfig(dir, cfg);
      const sub = await fleetClient(broker);
      const got = record(sub);
      await sub.subscribeAsync(`${T}/status`, { qos: 1 });
      const child = spawnDaemon(file);
      try {
        await until(() => got.some((m) => m.json?.state === "online"), "birth of the child process");
        assert.ok(!got.some((m) => m.json?.state === "offline" && !m.retain), "no offline before the kill");
        await stopDaemon(child, "SIGKILL");
        await until(() => got.some((m) => m.json?.state === "offline"), "Last Will");
        // Retained: a new subscriber sees the gateway offline.
        const late = await fleetClient(broker);
        const lg = record(late);
        await late.subscribeAsync(`${T}/status`, { qos: 1 });
        await until(() => lg.length > 0, "retained status");
        assert.equal(lg[0].json.state, "offline");
        assert.equal(lg[0].retain, true);
        await late.endAsync();
      } finally {
        await stopDaemon(child, "SIGKILL");
        await sub.endAsync();
      }
    }),
  );
});

test("broker stopped for at least 20 snapshots and started again while HTTPS keeps pushing: MQTT gets every snapshot, in order, one content per timestamp; polling and the API go on; /healthz warns once the outage is long", async () => {
  const sink = await startSink();
  try {
    await withSite(tcpScenario(), (site) =>
      withTmpDir((dir) =>
        withBroker(dir, async (broker) => {
          // A persistent session: the broker keeps what arrives before this subscriber is back.
          const sub = await fleetClient(broker, { clean: false, clientId: "fleet-outage", properties: { sessionExpiryInterval: 3600 } });
          const got = record(sub);
          await sub.subscribeAsync(`${T}/telemetry`, { qos: 1 });
          const port = site.tcpPorts[0];
          // The outage is made to look long on the monotonic clock the fleet measures it with.
          let skew = 0;
          const clock = { ...systemClock, mono: () => performance.now() + skew };
          const fleetWarnings = async () =>
            ((await gw.call("GET", "/healthz")).json.warnings as Array<{ code: string; message: string }>).filter(
              (w) => w.code === "fleet_broker_unreachable",
            );
          const gw = await startGateway(
            join(dir, "gw"),
            {
              // The HTTPS partner takes everything meanwhile: its cursor runs ahead of MQTT's,
              // and the store must keep what MQTT has not had.
              partner: partnerTo(sink),
              fleet: fleetConfig(broker),
              telemetry: { poll_interval_ms: 200, retention_max_mb: 64, commit_interval_s: 1 },
              devices: [tcpDevice("battery", port, 1), tcpDevice("grid", port, 3)] as never,
            },
            { clock },
          );
          const fleet = gw.daemon.part<{ current: Fleet } & import("../../src/lifecycle.js").Part>("fleet").current;
          const lastId = () =>
            gw.daemon.storage.telemetryDb.prepare("SELECT coalesce(max(id), 0) FROM tm_snapshot").pluck().get() as number;
          try {
            await until(() => tel(got).length >= 5, "live telemetry");
            await broker.stop();
            const atStop = lastId();
            await until(() => !fleet.connected, "the gateway notices");
            // The outage lasts until polling has stored 20 more snapshots and HTTPS has 20
            // that MQTT has not (an event, not a fixed time): polling and HTTPS go on.
            const httpsOnly = () => {
              const mqttNow = new Set(tel(got).map((m) => m.json.timestamp as string));
              return sink.accepted("/v1/telemetry").filter((r) => !mqttNow.has((r.body as any).timestamp as string)).length;
            };
            await until(
              () => lastId() >= atStop + 20 && httpsOnly() >= 20,
              "20 snapshots polled and pushed over HTTPS during the outage",
              60_000,
            );
            assert.equal(fleet.connected, false, "the broker was down all along");
            const api = await gw.call("GET", "/v1/api/gateway/site-001/devicesync", { headers: gw.apiKeyHeaders });
            assert.equal(api.status, 200, "the API answers during the outage");
            assert.deepEqual(await fleetWarnings(), [], "a short outage is no warning");
            skew = UNREACHABLE_WARN_MS;
            const [warning] = await fleetWarnings();
            assert.match(
              warning?.message ?? "",
              /^the fleet broker has been unreachable for 1\d\d s \(since 20\d\d-.*Z\); telemetry and events wait in the store$/,
            );
            assert.equal((await gw.call("GET", "/healthz")).json.status, "ok", "a warning, the gateway still serves");
            const last = lastId();
            await broker.start();
            await until(() => fleet.stats().telemetry_cursor >= last, "backlog drained", 60_000);
            assert.deepEqual(await fleetWarnings(), [], "no warning once connected again");
            // Everything HTTPS accepted up to `last` (every snapshot) must have reached MQTT.
            await until(() => sink.accepted("/v1/telemetry").length >= last, "HTTPS has every snapshot too");
            const want = [...new Set(sink.accepted("/v1/telemetry").map((r) => (r.body as any).timestamp as string))].sort().slice(0, last);
            const distinct = () => distinctTimestamps(tel(got));
            await until(() => distinct().length >= want.length, "every snapshot at the subscriber");
            assert.deepEqual(distinct().slice(0, want.length), want, "every snapshot once, oldest first");
            assert.equal(fleet.stats().telemetry.rejected, 0);
          } finally {
            await gw.stop();
            await sub.endAsync();
          }
        }),
      ),
    );
  } finally {
    await sink.stop();
  }
});

test("commands: ping, devicesync, events, configure, dr answered with the correlation data; bad ones refused 4xx and the connection stays up", async () => {
  await withSite(tcpScenario(), (site) =>
    withTmpDir((dir) =>
      withBroker(dir, async (broker) => {
        const gw = await startGateway(join(dir, "gw"), {
          fleet: fleetConfig(broker),
          telemetry: { poll_interval_ms: 500, retention_max_mb: 64, commit_interval_s: 1 },
        });
        const fleet = gw.daemon.part<{ current: Fleet } & import("../../src/lifecycle.js").Part>("fleet").current;
        const cl = await fleetClient(broker);
        try {
          await until(() => fleet.connected, "gateway connected");
          // Its subscription follows the CONNACK: ping until it answers.
          await until(
            async () => (await command(cl, "site-001", "ping", undefined, 1000).catch(() => null)) !== null,
            "the gateway answers a ping",
          );
          const ping = await command(cl, "site-001", "ping", undefined);
          assert.equal(ping.json.status, 200);
          assert.equal(ping.json.data.pong, true);
          assert.equal(ping.props?.contentType, "application/json");

          // configure: the same service as PUT /gateway/admin/device/configure.
          const port = site.tcpPorts[0];
          const conf = await command(cl, "site-001", "configure", { devices: [tcpDevice("battery", port, 1)] });
          assert.equal(conf.json.status, 200, JSON.stringify(conf.json));
          assert.deepEqual(
            conf.json.data.devices.map((d: any) => [d.device_id, d.status]),
            [["battery", "accepted"]],
          );
          const badOrg = await command(cl, "site-001", "configure", {
            devices: [{ ...tcpDevice("x", port, 1), device_integration: "00000000-0000-4000-8000-000000000000/sunspec" }],
          });
          assert.equal(badOrg.json.status, 400);
          assert.equal(badOrg.json.error, "invalid_request");
          assert.equal(badOrg.json.details[0].path, "devices[0].device_integration");

          // The same view as GET .../devicesync. The two are taken a moment apart, and a poll in
          // between may change a device's op mode (a slow read on a loaded machine marks it
          // offline): compare a pair taken with no device read finishing between them.
          let sync: Awaited<ReturnType<typeof command>> | null = null;
          let http: Awaited<ReturnType<typeof gw.call>> | null = null;
          await until(async () => {
            const reads = () =>
              gw.daemon.part<ModbusPolling>("modbus-polling").stats.reads_ok +
              gw.daemon.part<ModbusPolling>("modbus-polling").stats.reads_failed;
            const polls = reads();
            sync = await command(cl, "site-001", "devicesync", undefined);
            http = await gw.call("GET", "/v1/api/gateway/site-001/devicesync", { headers: gw.apiKeyHeaders });
            return reads() === polls;
          }, "a devicesync pair with no read between");
          assert.deepEqual(sync!.json.data, http!.json);

          // dr: the same validation as POST .../dr.
          const ev = event({ event_id: "7f0c2a4e-8d3b-4c5a-9e7f-0a1b2c3d4e5f", event_quantity: 1 }, 60_000, 60_000);
          const dr = await command(cl, "site-001", "dr", { mode: "test", event_slots: [ev] });
          assert.deepEqual(dr.json, { status: 200, data: [{ event_id: ev.event_id, status: "accepted" }] });
          const badDr = { mode: "live", event_slots: [{ ...ev, priority: 0 }] };
          const viaMqtt = await command(cl, "site-001", "dr", badDr);
          const viaHttps = await gw.call("POST", "/v1/api/gateway/site-001/dr", { body: badDr, headers: gw.apiKeyHeaders });
          assert.equal(viaHttps.status, 400);
          assert.deepEqual(viaMqtt.json, { status: 400, ...viaHttps.json }, "same error body as the HTTPS route");
          const events = await command(cl, "site-001", "events", { limit: 10 });
          assert.equal(events.json.status, 200);
          assert.deepEqual(
            events.json.data.events.map((e: any) => [e.event_id, e.state]),
            [[ev.event_id, "scheduled"]],
          );

          // Bad commands: answered 4xx where there is a response topic; the connection stays up.
          const notJson = await command(cl, "site-001", "dr", "{not json");
          assert.equal(notJson.json.status, 400);
          assert.equal(notJson.json.error, "invalid_request");
          assert.deepEqual(Object.keys(notJson.json).sort(), ["details", "error", "message", "status"]);
          const unknown = await command(cl, "site-001", "reboot", {});
          assert.equal(unknown.json.status, 404);
          assert.equal(unknown.json.error, "not_found");
          const badLimit = await command(cl, "site-001", "events", { limit: "all" });
          assert.equal(badLimit.json.status, 400);
          await cl.publishAsync(`${T}/cmd/ping`, "{}", { qos: 1 }); // no response topic: logged, ignored
          await cl.publishAsync(`${T}/cmd/ping`, "{}", { qos: 1, properties: { responseTopic: `${T}/reply/#` } }); // invalid response topic
          const after = await command(cl, "site-001", "ping", {});
          assert.equal(after.json.status, 200);
          assert.equal(fleet.connected, true);
          assert.equal(fleet.stats().connects, 1, "never reconnected");
        } finally {
          await cl.endAsync();
          await gw.stop();
        }
      }),
    ),
  );
});

test("kill -9 of `sitegate run` with a telemetry backlog (broker down): after a restart every stored snapshot reaches the broker with one content per timestamp", async () => {
  await withSite(tcpScenario(), (site) =>
    withTmpDir((dir) =>
      withBroker(dir, async (broker) => {
        const port = site.tcpPorts[0];
        const base = testConfigInput(join(dir, "data"));
        const api = `127.0.0.1:${await freePort()}`;
        const cfg = {
          ...base,
          http: { ...base.http, listen: api },
          log_level: "warn",
          fleet: fleetConfig(broker),
          telemetry: { poll_interval_ms: 200, retention_max_mb: 64, commit_interval_s: 1 },
          devices: [tcpDevice("battery", port, 1), tcpDevice("grid", port, 3)],
        };
        const file = writeConfig(dir, cfg);
        const sub = await fleetClient(broker, { clean: false, clientId: "fleet-crash", properties: { sessionExpiryInterval: 3600 } });
        const got = record(sub);
        await sub.subscribeAsync(`${T}/telemetry`, { qos: 1 });
        const run = () => spawnDaemon(file);
        let child = run();
        // The HTTPS partner is unreachable, so its cursor stays at 0: pending = the newest id.
        // (telemetry.db is the running daemon's alone; it is read after the kill.)
        const newest = () => daemonMetric(`https://${api}`, "sitegate_samples_pending_snapshots");
        try {
          await until(() => tel(got).length >= 5, "live telemetry");
          await broker.stop();
          const atStop = await newest();
          await until(async () => (await newest()) >= atStop + 15, "a backlog while the broker is down");
          await stopDaemon(child, "SIGKILL");
          const rows = readTelemetry(
            join(dir, "data"),
            (db) => db.prepare("SELECT id, ts FROM tm_snapshot ORDER BY id").all() as Array<{ id: number; ts: number }>,
          );
          await broker.start();
          child = run();
          const want = rows.map((r) => new Date(r.ts).toISOString());
          const distinct = () => distinctTimestamps(tel(got));
          await until(() => want.every((t) => distinct().includes(t)), "every snapshot committed before the kill", 60_000);
          const order = distinct();
          assert.deepEqual(order.slice(0, want.length), want, "oldest first, each once");
        } finally {
          await stopDaemon(child);
          await sub.endAsync();
        }
      }),
    ),
  );
});

test("command guards: a retained command is ignored, over 256 KiB gets 413, a 9th command in progress gets 503; a clean stop publishes offline itself", async () => {
  await withSite(tcpScenario(), (site) =>
    withTmpDir((dir) =>
      withBroker(dir, async (broker) => {
        // A retained ping waits on the broker before the gateway subscribes: it is delivered
        // to the gateway as retained (the only way a command arrives with the retain flag).
        const cl = await fleetClient(broker);
        const got = record(cl);
        const replyTopic = `${T}/reply/${cl.options.clientId}`;
        await cl.subscribeAsync([replyTopic, `${T}/status`], { qos: 1 });
        const retainedCorr = Buffer.from("retained-ping");
        await cl.publishAsync(`${T}/cmd/ping`, "{}", {
          qos: 1,
          retain: true,
          properties: { responseTopic: replyTopic, correlationData: retainedCorr },
        });
        const gw = await startGateway(join(dir, "gw"), {
          fleet: fleetConfig(broker),
          telemetry: { poll_interval_ms: 500, retention_max_mb: 64, commit_interval_s: 1 },
        });
        let stopped = false;
        const fleet = gw.daemon.part<{ current: Fleet } & import("../../src/lifecycle.js").Part>("fleet").current;
        try {
          await until(() => fleet.connected, "gateway connected");
          await until(
            async () => (await command(cl, "site-001", "ping", undefined, 1000).catch(() => null)) !== null,
            "the gateway answers a ping",
          );
          // The retained ping came with the subscription, before any of these pings: by now
          // it would have been answered.
          assert.equal(got.filter((m) => m.props?.correlationData?.equals(retainedCorr)).length, 0, "a retained command gets no answer");
          await cl.publishAsync(`${T}/cmd/ping`, "", { qos: 1, retain: true }); // clears the retained message

          // Over 256 KiB: 413 before it is parsed.
          const big = await command(cl, "site-001", "dr", JSON.stringify({ mode: "test", pad: "x".repeat(256 * 1024) }));
          assert.equal(big.json.status, 413);
          assert.equal(big.json.error, "payload_too_large");
          const justUnder = await command(cl, "site-001", "ping", JSON.stringify({ pad: "x".repeat(256 * 1024 - 20) }));
          assert.equal(justUnder.json.status, 200, "256 KiB itself is allowed");

          // Eight configures of a device that does not answer are in progress (each waits for
          // its Modbus timeout); the ninth command that would run is refused 503 at once.
          site.setFault({ device: "battery", fault: "no_answer" });
          const port = site.tcpPorts[0];
          const slow = Array.from({ length: 8 }, (_, i) =>
            command(cl, "site-001", "configure", { devices: [tcpDevice(`b${i}`, port, 1)] }, 110_000),
          );
          const ninth = await command(cl, "site-001", "configure", { devices: [tcpDevice("b9", port, 1)] });
          assert.equal(ninth.json.status, 503, JSON.stringify(ninth.json));
          assert.equal(ninth.json.error, "unavailable");
          site.clearFaults();
          const answers = await Promise.all(slow);
          for (const a of answers) assert.equal(a.json.status, 200, "the eight ran to their end");
          const again = await command(cl, "site-001", "configure", { devices: [tcpDevice("b10", port, 1)] });
          assert.equal(again.json.status, 200, "room again once they finished");
          assert.equal(fleet.stats().connects, 1, "never reconnected");

          // A clean stop publishes the retained offline status itself (with its time) and
          // ends with a DISCONNECT, so the broker's Last Will (which has no time) never follows.
          await gw.stop();
          stopped = true;
          await until(() => got.some((m) => m.topic === `${T}/status` && m.json?.state === "offline"), "offline status after a clean stop");
          // A marker published after the stop: the broker handled the gateway's closed socket
          // (and any Last Will it owed) before it took this later publish.
          await cl.subscribeAsync(`${T}/test-marker`, { qos: 1 });
          await cl.publishAsync(`${T}/test-marker`, "after-stop", { qos: 1 });
          await until(() => got.some((m) => m.topic === `${T}/test-marker`), "the marker after the stop");
          const offline = got.filter((m) => m.topic === `${T}/status` && m.json?.state === "offline");
          assert.equal(offline.length, 1, `one offline status, the gateway's own: ${JSON.stringify(offline.map((m) => m.payload))}`);
          assert.equal(typeof offline[0].json.at, "string", "published by the gateway, not the Last Will");
        } finally {
          if (!stopped) await gw.stop();
          await cl.endAsync();
        }
      }),
    ),
  );
});

/** `sitegate run` in its own process (its RSS and log lines are its own) with the fleet on a real broker, and a fleet client. */
async function withFleetDaemon(
  fn: (d: import("../support/daemon-process.js").DaemonProcess, cl: import("mqtt").MqttClient, got: Received[]) => Promise<void>,
): Promise<void> {
  await withTmpDir((dir) =>
    withBroker(dir, async (broker) => {
      const d = await spawnDaemonProcess(dir, { fleet: fleetConfig(broker) });
      const cl = await fleetClient(broker);
      const got = record(cl);
      try {
        await until(async () => (await command(cl, "site-001", "ping", undefined, 1000).catch(() => null)) !== null, "ping answered");
        await fn(d, cl, got);
      } finally {
        await cl.endAsync();
        await d.stop();
      }
    }),
  );
}

test("a 20 MB command never reaches the gateway (MQTT 5 Maximum Packet Size): no answer, peak RSS grows under 10 MiB and stays under 250 MiB, the connection stays", async (t) => {
  await withFleetDaemon(async (d, cl, got) => {
    const connects = await daemonMetric(d.url, "sitegate_fleet_connects_total");
    const peakRss = () => Number(/^VmHWM:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${d.child.pid}/status`, "utf8"))![1]) * 1024;
    const before = peakRss();
    // The broker takes 20 MB from the fleet client and drops it for the gateway. A ping
    // sent after it is delivered after it: once the ping is answered, the big one would
    // have been answered (413) had it arrived.
    const bigCorr = Buffer.from("twenty-megabytes");
    await cl.publishAsync(`${T}/cmd/ping`, Buffer.alloc(20 * 1024 * 1024, 0x20), {
      qos: 1,
      properties: { responseTopic: `${T}/reply/${cl.options.clientId}`, correlationData: bigCorr },
    });
    assert.equal((await command(cl, "site-001", "ping", undefined)).json.status, 200, "the gateway still answers");
    assert.equal(got.filter((m) => m.props?.correlationData?.equals(bigCorr)).length, 0, "the 20 MB command got no answer");
    const after = peakRss();
    const MiB = 1024 * 1024;
    t.diagnostic(`peak RSS ${(before / MiB).toFixed(1)} -> ${(after / MiB).toFixed(1)} MiB across the 20 MB publish`);
    assert.ok(after - before < 10 * MiB, `peak RSS grew ${((after - before) / MiB).toFixed(1)} MiB`);
    assert.ok(after < 250 * MiB, `peak RSS ${(after / MiB).toFixed(0)} MiB`);
    assert.equal(await daemonMetric(d.url, "sitegate_fleet_connects_total"), connects, "never reconnected");
  });
});

test("5,000 refused commands are each answered and counted in a metric, and only a few are logged", async (t) => {
  await withFleetDaemon(async (d, cl, got) => {
    const refusedLines = () => d.lines.filter((l) => String(l.msg).startsWith("command refused")).length;
    const replyTopic = `${T}/reply/${cl.options.clientId}`;
    const answers = () => got.filter((m) => m.topic === replyTopic && m.json?.status === 404).length;
    // In rounds of 100: the broker queues at most 1,000 messages for a client.
    for (let round = 0; round < 50; round++) {
      const sent = Array.from({ length: 100 }, (_, i) =>
        cl.publishAsync(`${T}/cmd/forged`, "{}", {
          qos: 1,
          properties: { responseTopic: replyTopic, correlationData: Buffer.from(`f${round}-${i}`) },
        }),
      );
      await Promise.all(sent);
      await until(() => answers() === (round + 1) * 100, `${(round + 1) * 100} refusals answered`);
    }
    const lines = refusedLines();
    t.diagnostic(`${lines} warning lines for 5,000 refused commands`);
    assert.ok(lines >= 1 && lines <= 20, `${lines} warning lines for 5,000 refused commands`);
    assert.equal(await daemonMetric(d.url, 'sitegate_fleet_commands_refused_total\\{reason="404"\\}'), 5000);
    assert.equal((await command(cl, "site-001", "ping", undefined)).json.status, 200, "still answering");
  });
});
