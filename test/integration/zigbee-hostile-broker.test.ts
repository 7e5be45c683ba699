// The gateway's Zigbee side against a broker where someone else publishes too: a forged
// retained bridge/devices with names that are no safe topic, forged state messages (too
// large, too many keys, not JSON, unbelievable readings). Real mosquitto, the simulator as
// the zigbee2mqtt bridge, a test client as the forger. And the broker over mqtts://.
import { test } from "node:test";
import assert from "node:assert/strict";
import { until } from "../support/wait.js";
import { Recorder } from "../support/mosquitto.js";
import { Z2M_BASE, withZigbeeGateway, zigbeeConfig } from "../support/zigbee-site.js";
import { testCert } from "../support/tls.js";
import type { Gateway } from "../support/gateway.js";
import type { SiteClock as Poller } from "../../src/telemetry/site-clock.js";
import type { SampleStore } from "../../src/telemetry/sample-store.js";

const ZIGBEE = ["plug-1", "plug-2", "trv-1"];

async function metric(gw: Gateway, name: string, labels = ""): Promise<number> {
  const text = (await gw.call("GET", "/metrics")).text;
  const line = text.split("\n").find((l) => l.startsWith(`${name}${labels} `));
  return line ? Number(line.split(" ")[1]) : 0;
}

test("names from a forged device list never reach a topic: bridge/request/..., +, #, NUL and another device's name leave the device offline with the reason; the connection stays; a safe name is taken again", async () => {
  await withZigbeeGateway({}, async (_site, gw, broker) => {
    const poller = gw.daemon.part<Poller>("poller");
    const online = (id: string) => poller.health(id)?.online === true;
    await until(() => ZIGBEE.every(online), "zigbee devices online");
    const spy = await Recorder.connect(broker.url, [`${Z2M_BASE}/#`]);
    try {
      const list = (await spy.wait(`${Z2M_BASE}/bridge/devices`)).json as Array<Record<string, unknown>>;
      // plug-1 is configured by IEEE address: its name is whatever the list says.
      const forge = (name: string) =>
        spy.client.publishAsync(
          `${Z2M_BASE}/bridge/devices`,
          JSON.stringify(list.map((d) => (d.ieee_address === "0x00158d0001a2b3c4" ? { ...d, friendly_name: name } : d))),
          { qos: 1, retain: true },
        );
      const bad = ["bridge/request/device/remove", "+", "#", "washer\u0000plug", "dryer-plug"];
      for (const name of bad) {
        await forge(name);
        await until(
          () => !online("plug-1") && (poller.health("plug-1")?.last_error ?? "").includes(JSON.stringify(name)),
          `plug-1 offline, its list name ${JSON.stringify(name)} refused`,
        );
        assert.ok(online("plug-2") && online("trv-1"), "the other devices stay online");
      }
      assert.match(poller.health("plug-1")!.last_error!, /is the name of plug-2 too/);

      await forge("washer-plug");
      await until(() => online("plug-1") && Math.abs((poller.latest("plug-1")?.power_w ?? 0) - 2000) < 50, "plug-1 back under a safe name");
      const requests = spy.got.filter((m) => m.topic.startsWith(`${Z2M_BASE}/bridge/request/`));
      assert.deepEqual(
        requests.map((m) => m.topic),
        [],
        "nothing published below bridge/request/",
      );
      assert.equal(await metric(gw, "sitegate_zigbee_connects_total"), 1, "the broker never dropped the gateway");
      assert.equal(await metric(gw, "sitegate_zigbee_rejected_total", '{reason="unsafe_name"}'), bad.length);
    } finally {
      await spy.end();
    }
  });
});

test("forged state messages (1 MiB, 5,000 keys, not JSON, unbelievable readings) and unreadable bridge/state and availability are dropped and counted; nothing of them reaches telemetry; the connection stays", async () => {
  await withZigbeeGateway({}, async (_site, gw, broker) => {
    const poller = gw.daemon.part<Poller>("poller");
    const samples = gw.daemon.part<SampleStore>("samples");
    const online = (id: string) => poller.health(id)?.online === true;
    await until(() => ZIGBEE.every(online), "zigbee devices online");
    const forger = await Recorder.connect(broker.url, [`${Z2M_BASE}/bridge/state`]);
    try {
      // dryer-plug has no metering: the simulator never reports its power, so any power_w is forged.
      const topic = `${Z2M_BASE}/dryer-plug`;
      const manyKeys = Object.fromEntries([["power", 1500], ...Array.from({ length: 5000 }, (_, i) => [`k${i}`, 0])]);
      const forged = [
        JSON.stringify({ power: 1500, pad: "x".repeat(1024 * 1024) }),
        JSON.stringify(manyKeys),
        "not json {",
        JSON.stringify({ power: 99_999_999 }),
        JSON.stringify({ power: "1500" }),
        JSON.stringify({ power: -1e9, voltage: 1e6 }),
      ];
      for (const body of forged) await forger.publish(topic, body);
      // Neither online nor offline: the bridge's and the device's last word stands.
      await forger.publish(`${Z2M_BASE}/bridge/state`, "garbage");
      await forger.publish(`${topic}/availability`, { state: 42 });
      // The broker keeps one publisher's order: once this marker is read, so was every forgery.
      await forger.publish(topic, { local_temperature: 12.34 });
      await until(() => poller.latest("plug-2")?.temperature_c === 12.34, "the marker read");

      assert.equal(poller.latest("plug-2")?.power_w, undefined, "no forged power");
      assert.equal(poller.latest("plug-2")?.voltage_v, undefined, "no forged voltage");
      // Every stored snapshot from the first (the push may have settled them all), once the
      // marker's reading has joined one at a site tick.
      const plug2 = () => samples.pending(100_000, 0).flatMap((s) => s.devices.filter((d) => d.device_id === "plug-2"));
      await until(() => plug2().some((d) => d.metrics.temperature_c === 12.34), "the marker in a stored snapshot");
      const stored = plug2();
      assert.ok(
        stored.every((d) => d.metrics.power_w === undefined),
        "no snapshot holds a forged power",
      );
      const rejected = (reason: string) => metric(gw, "sitegate_zigbee_rejected_total", `{reason="${reason}"}`);
      assert.equal(await rejected("too_large"), 1);
      assert.equal(await rejected("too_many_keys"), 1);
      assert.equal(await rejected("not_json"), 3, "the state message, bridge/state and availability");
      assert.equal(await rejected("bad_reading"), 3);
      assert.equal(await metric(gw, "sitegate_zigbee_connects_total"), 1);
      assert.ok(ZIGBEE.every(online), "every zigbee device still online");
    } finally {
      await forger.end();
    }
  });
});

test("zigbee over mqtts:// with ca_file: the devices come online through the broker's TLS listener", async () => {
  await withZigbeeGateway(
    { tls: true, config: (_site, broker) => ({ zigbee: zigbeeConfig(broker.tlsUrl!, { ca_file: testCert().certFile }) }) },
    async (_site, gw) => {
      const poller = gw.daemon.part<Poller>("poller");
      await until(() => ZIGBEE.every((id) => poller.health(id)?.online === true), "zigbee devices online over TLS");
      assert.equal(await metric(gw, "sitegate_zigbee_connected"), 1);
    },
  );
});
