// The reconnect driver of the fleet and Zigbee connections on a real MQTT.js client against
// a port where nothing listens: each failed attempt schedules exactly one next attempt, at
// the policy's delay (the ceiling doubles per failure up to the cap), and attempts are
// counted as events, with no timing assumed. A random source of ~1 makes each delay its ceiling.
import { test } from "node:test";
import assert from "node:assert/strict";
import { connect } from "mqtt";
import { freePort } from "../support/net.js";
import { until } from "../support/wait.js";
import { MqttRedial } from "../../src/util/mqtt-redial.js";
import { ReconnectBackoff } from "../../src/util/reconnect-backoff.js";

test("a broker that is down: one attempt per failure, delays doubling to the cap", async () => {
  const port = await freePort();
  const client = connect({ host: "127.0.0.1", port, protocol: "mqtt", protocolVersion: 5, reconnectPeriod: 0 });
  client.on("error", () => {});
  const backoff = new ReconnectBackoff(
    { baseMs: 2, capMs: 32, holdMs: 60_000 },
    () => 0,
    () => 0.999_999,
  );
  const delays: number[] = [];
  const redial = new MqttRedial(client, backoff, { scheduled: (ms) => delays.push(ms) });
  try {
    await until(() => redial.attempts >= 10, "10 attempts");
    redial.stop();
    client.end(true);
    assert.deepEqual(delays.slice(0, 9), [1, 3, 7, 15, 31, 31, 31, 31, 31]);
    assert.ok(
      delays.length === redial.attempts || delays.length === redial.attempts - 1,
      `${delays.length} delays for ${redial.attempts} attempts`,
    );
  } finally {
    redial.stop();
    client.end(true);
  }
});
