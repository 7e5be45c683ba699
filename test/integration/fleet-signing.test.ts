// Fleet command authorization against a real mosquitto (TLS, the README's ACL) and real
// MQTT.js clients: with fleet.command_keys set, unsigned, badly signed, tampered, stale and
// replayed commands are refused (a replayed configure does not write to the device again,
// also after a restart); and with or without keys, answers only go below reply/.
import { test } from "node:test";
import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { join } from "node:path";
import type { IPublishPacket, MqttClient } from "mqtt";
import { withTmpDir } from "../support/tmp.js";
import { withSite, tcpScenario } from "../support/site.js";
import { startGateway, tcpDevice, type Gateway } from "../support/gateway.js";
import { until } from "../support/wait.js";
import { fleetClient, fleetConfig, record, withBroker } from "../support/mosquitto.js";
import type { Fleet } from "../../src/fleet/fleet.js";
import type { Part } from "../../src/lifecycle.js";
import { signCommand } from "../../src/fleet/signing.js";

const T = "sitegate/site-001";
const M124 = 40176; // storage model 124 in the simulator's battery

const keyPair = () => {
  const k = generateKeyPairSync("ed25519");
  return {
    pub: k.publicKey.export({ type: "spki", format: "pem" }) as string,
    priv: k.privateKey.export({ type: "pkcs8", format: "pem" }) as string,
  };
};

interface Sent {
  name: string;
  body: Buffer;
  userProperties?: Record<string, string>;
  responseTopic?: string;
}

/** Publishes one command and waits for the answer that carries its correlation data. */
async function send(cl: MqttClient, c: Sent): Promise<any> {
  const replyTopic = c.responseTopic ?? `${T}/reply/${cl.options.clientId}`;
  const corr = Buffer.from(Math.random().toString(16).slice(2));
  await cl.subscribeAsync(`${T}/reply/#`, { qos: 1 });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      cl.removeListener("message", on);
      reject(new Error(`no answer to ${c.name} within 20 s`));
    }, 20_000);
    const on = (topic: string, buf: Buffer, packet: IPublishPacket) => {
      if (topic !== replyTopic || !packet.properties?.correlationData?.equals(corr)) return;
      clearTimeout(timer);
      cl.removeListener("message", on);
      resolve(JSON.parse(buf.toString()));
    };
    cl.on("message", on);
    cl.publish(`${T}/cmd/${c.name}`, c.body, {
      qos: 1,
      properties: { responseTopic: replyTopic, correlationData: corr, ...(c.userProperties ? { userProperties: c.userProperties } : {}) },
    });
  });
}

const fleetOf = (gw: Gateway) => gw.daemon.part<{ current: Fleet | null } & Part>("fleet").current!;

test("with command_keys: unsigned, wrong key, tampered, other site, stale and future commands get 401; a replay gets 409 and a replayed configure writes nothing, also after a restart", async () => {
  const key = keyPair();
  const intruder = keyPair();
  await withSite(tcpScenario(), (site) =>
    withTmpDir((dir) =>
      withBroker(dir, async (broker) => {
        const cfg = {
          fleet: { ...fleetConfig(broker), command_keys: [key.pub] },
          telemetry: { poll_interval_ms: 500, retention_max_mb: 64, commit_interval_s: 1 },
        };
        let gw = await startGateway(join(dir, "gw"), cfg);
        const cl = await fleetClient(broker);
        const signed = (name: string, body: Buffer, over: { priv?: string; site?: string; issuedAt?: string } = {}): Sent => ({
          name,
          body,
          userProperties: signCommand(over.priv ?? key.priv, {
            site: over.site ?? "site-001",
            name,
            body,
            ...(over.issuedAt ? { issuedAt: over.issuedAt } : {}),
          }),
        });
        const empty = Buffer.alloc(0);
        try {
          await until(() => fleetOf(gw).connected, "gateway connected");
          // Its subscription follows the CONNACK: ping (signed) until it answers.
          await until(
            async () =>
              (await Promise.race([send(cl, signed("ping", empty)), new Promise((r) => setTimeout(() => r(null), 1000))])) !== null,
            "the gateway answers a signed ping",
          );

          const unsigned = await send(cl, { name: "ping", body: empty });
          assert.equal(unsigned.status, 401);
          assert.equal(unsigned.error, "unauthorized");
          assert.match(unsigned.message, /unsigned command refused/);
          assert.match((await send(cl, signed("ping", empty, { priv: intruder.priv }))).message, /does not verify/);
          assert.match((await send(cl, signed("ping", empty, { site: "site-002" }))).message, /does not verify/);
          const forPing = signed("ping", empty);
          assert.equal((await send(cl, { ...forPing, name: "devicesync" })).status, 401, "signed for another command");

          const battery = tcpDevice("battery", site.tcpPorts[0], 1, "sunspec", {
            mb_check_write: [{ reg_cmd_id: 1, reg_fun: 6, reg_reg: M124 + 2, reg_value: 4000 }],
          });
          const confBody = Buffer.from(JSON.stringify({ devices: [battery] }));
          const writes = () => (site.state().devices.battery.writes as unknown[]).length;
          const conf = signed("configure", confBody);
          const tampered = await send(cl, {
            ...conf,
            body: Buffer.from(
              JSON.stringify({
                devices: [{ ...battery, mb_check_write: [{ reg_cmd_id: 1, reg_fun: 6, reg_reg: M124 + 2, reg_value: 9 }] }],
              }),
            ),
          });
          assert.equal(tampered.status, 401);
          assert.equal(writes(), 0, "a refused configure writes nothing");
          const stale = await send(cl, signed("configure", confBody, { issuedAt: new Date(Date.now() - 301_000).toISOString() }));
          assert.equal(stale.status, 401);
          assert.match(stale.message, /older than fleet.command_max_age_s \(300 s\)/);
          assert.match(
            (await send(cl, signed("ping", empty, { issuedAt: new Date(Date.now() + 120_000).toISOString() }))).message,
            /ahead of the gateway's clock/,
          );
          assert.equal(writes(), 0);

          const first = await send(cl, conf);
          assert.equal(first.status, 200, JSON.stringify(first));
          assert.deepEqual(
            first.data.devices.map((d: any) => [d.device_id, d.status]),
            [["battery", "accepted"]],
          );
          assert.equal(writes(), 1, "the check write ran once");
          const replay = await send(cl, conf);
          assert.equal(replay.status, 409);
          assert.equal(replay.error, "conflict");
          assert.match(replay.message, /used before/);
          assert.equal(writes(), 1, "a replayed configure does not write again");

          // The nonce is in the database: a restarted gateway refuses the replay too.
          await gw.stop();
          gw = await startGateway(join(dir, "gw"), cfg);
          await until(() => fleetOf(gw).connected, "gateway connected again");
          await until(
            async () =>
              (await Promise.race([send(cl, signed("ping", empty)), new Promise((r) => setTimeout(() => r(null), 1000))])) !== null,
            "the restarted gateway answers",
          );
          const afterRestart = await send(cl, conf);
          assert.equal(afterRestart.status, 409);
          assert.equal(writes(), 1, "no write after the restart either");
          const again = await send(cl, signed("configure", confBody));
          assert.equal(again.status, 200, "signed anew (a new nonce), the same configure runs");
          assert.equal(writes(), 2);
        } finally {
          await cl.endAsync();
          await gw.stop();
        }
      }),
    ),
  );
});

test("answers go only below {prefix}/{site}/reply/: a command naming another response topic gets nothing anywhere", async () => {
  await withTmpDir((dir) =>
    withBroker(dir, async (broker) => {
      const gw = await startGateway(join(dir, "gw"), {
        fleet: fleetConfig(broker),
        telemetry: { poll_interval_ms: 500, retention_max_mb: 64, commit_interval_s: 1 },
      });
      const cl = await fleetClient(broker);
      const watch = await fleetClient(broker);
      const seen = record(watch);
      await watch.subscribeAsync("#", { qos: 1 });
      try {
        await until(() => fleetOf(gw).connected, "gateway connected");
        await until(
          async () =>
            (await Promise.race([
              send(cl, { name: "ping", body: Buffer.alloc(0) }),
              new Promise((r) => setTimeout(() => r(null), 1000)),
            ])) !== null,
          "the gateway answers",
        );
        const outside = [
          `${T}/status`,
          `${T}/events`,
          `${T}/telemetry`,
          `${T}/replyx/a`,
          `${T}/reply/`,
          `${T}/reply`,
          `${T}/cmd/ping`,
          "sitegate/site-001x/reply/a",
          "elsewhere/reply/a",
        ];
        const corrs = outside.map((_, i) => Buffer.from(`outside-${i}`));
        for (const [i, responseTopic] of outside.entries()) {
          await cl.publishAsync(`${T}/cmd/ping`, "", { qos: 1, properties: { responseTopic, correlationData: corrs[i] } });
        }
        // Commands are handled in order: once this one is answered, the ones before were handled.
        const barrier = await send(cl, { name: "ping", body: Buffer.alloc(0) });
        assert.equal(barrier.status, 200);
        await until(
          () => seen.some((m) => m.topic.startsWith(`${T}/reply/`) && m.json?.data?.pong === true),
          "the watcher got the barrier's answer",
        );
        // The commands themselves (empty payloads) carry the correlation data too; an answer is JSON.
        const leaked = seen.filter(
          (m) => m.json !== null && m.props?.correlationData && corrs.some((c) => c.equals(m.props!.correlationData!)),
        );
        assert.deepEqual(
          leaked.map((m) => m.topic),
          [],
          "no answer outside reply/",
        );
        assert.ok(
          !seen.some((m) => m.topic === `${T}/status` && m.json?.data?.pong),
          "the retained status was not overwritten by an answer",
        );
      } finally {
        await watch.endAsync();
        await cl.endAsync();
        await gw.stop();
      }
    }),
  );
});
