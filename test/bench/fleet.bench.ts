// Fleet uplink (MQTT v5) figures against bare MQTT.js loops on the same mosquitto in the
// same run, both in one child process under the unit's node flags (and once more with no
// flags, for the flags' own cost): QoS 1 telemetry drained from the sample store through the fleet pipe vs a
// bare QoS 1 publish loop with the same in-flight window and payloads; commands answered
// per second vs a bare MQTT.js echo responder; bytes per telemetry message.
import { join } from "node:path";
import { connectAsync, type MqttClient } from "mqtt";
import type { BenchFn, BenchRow } from "./types.js";
import { flagSets, runInChild } from "./in-child.js";
import { StoragePart } from "../../src/storage/part.js";
import { SAMPLE_MIGRATIONS, SampleStore } from "../../src/telemetry/sample-store.js";
import { UPLINK_MIGRATIONS, instanceId } from "../../src/uplink/callbacks.js";
import { buildPayloads } from "../../src/uplink/data-push.js";
import { FLEET_MIGRATIONS } from "../../src/fleet/migrations.js";
import { NonceStore } from "../../src/fleet/nonces.js";
import { telemetryConsumer } from "../../src/fleet/telemetry-cursor.js";
import { DeliveryLog } from "../../src/delivery/log.js";
import { Fleet } from "../../src/fleet/fleet.js";
import { systemClock } from "../../src/util/clock.js";
import { silentLogger } from "../../src/log.js";
import { testConfig } from "../support/config.js";
import { snapshot } from "../support/uplink-harness.js";
import { startBroker, FLEET_USER, FLEET_PASSWORD, GATEWAY_PASSWORD, type Broker } from "../support/mosquitto.js";

const DEVICES = 5; // the demo site

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

async function bareClient(broker: Broker, user = FLEET_USER, password = FLEET_PASSWORD): Promise<MqttClient> {
  const c = await connectAsync(broker.url, {
    protocolVersion: 5,
    username: user,
    password,
    reconnectPeriod: 0,
    clientId: `bench-${Math.random().toString(16).slice(2, 8)}`,
  });
  return c;
}

/** Bare reference: QoS 1 publishes with at most `window` in flight. */
async function bareLoop(client: MqttClient, topic: string, payloads: string[], window: number): Promise<number> {
  const t0 = performance.now();
  await new Promise<void>((resolve, reject) => {
    let next = 0;
    let acked = 0;
    const send = () => {
      const i = next++;
      client.publish(topic, payloads[i], { qos: 1, properties: { userProperties: { "idempotency-key": `k-${i}` } } }, (err) => {
        if (err) return reject(err);
        if (++acked === payloads.length) return resolve();
        if (next < payloads.length) send();
      });
    };
    for (let i = 0; i < Math.min(window, payloads.length); i++) send();
  });
  return payloads.length / ((performance.now() - t0) / 1000);
}

/** Requests with up to `concurrency` outstanding; answers matched by correlation data. */
async function requestLoop(client: MqttClient, cmdTopic: string, replyTopic: string, n: number, concurrency: number): Promise<number> {
  await client.subscribeAsync(replyTopic, { qos: 1 });
  const t0 = performance.now();
  await new Promise<void>((resolve) => {
    let sent = 0;
    let answered = 0;
    const send = () => {
      const id = sent++;
      client.publish(cmdTopic, "{}", { qos: 1, properties: { responseTopic: replyTopic, correlationData: Buffer.from(String(id)) } });
    };
    const on = (topic: string) => {
      if (topic !== replyTopic) return;
      if (++answered === n) {
        client.removeListener("message", on);
        return resolve();
      }
      if (sent < n) send();
    };
    client.on("message", on);
    for (let i = 0; i < Math.min(concurrency, n); i++) send();
  });
  return n / ((performance.now() - t0) / 1000);
}

/**
 * Runs in a child process (in-child.ts) under the node flags being measured: the fleet part
 * and its bare references share that process, so they share the flags.
 */
export async function fleetFigures(arg: { quick: boolean; dir: string; label: string }): Promise<BenchRow[]> {
  const ctx = { quick: arg.quick, dir: arg.dir, log: (m: string) => process.stderr.write(`  fleet (${arg.label}): ${m}\n`) };
  const rows: BenchRow[] = [];
  // Other work shares these 2 cores: ours and the reference alternate round by round; the
  // figures are medians over the rounds and the ratio the median of each round's ratio.
  const rounds = ctx.quick ? 2 : 5;
  const n = ctx.quick ? 2000 : 10000;
  // The references run as another gateway (site-002): the same ACL patterns on the broker.
  const broker = await startBroker(join(ctx.dir, "broker"), { tls: false, users: { "site-002": GATEWAY_PASSWORD } });
  const log = silentLogger();
  const config = testConfig(join(ctx.dir, "gw"), {
    fleet: { url: broker.url, username: "site-001", password: GATEWAY_PASSWORD, topic_prefix: "sitegate", keepalive_s: 30 },
  });
  const storage = new StoragePart(config.data_dir, [SAMPLE_MIGRATIONS, UPLINK_MIGRATIONS, FLEET_MIGRATIONS], log);
  // The fleet hears of each append as the composition root's listener would tell it.
  let fleet: Fleet | null = null;
  const samples = new SampleStore(storage, { retentionBytes: 1024 * 1024 * 1024, log, appended: () => fleet?.samplesAppended() });
  storage.start();
  samples.start();
  const telemetry = telemetryConsumer(samples, storage);
  const ns = instanceId(storage.db);
  fleet = new Fleet({
    config,
    fleet: config.fleet!,
    nonces: new NonceStore(storage),
    deliveryLog: new DeliveryLog(storage),
    telemetry,
    devices: { list: () => [], get: () => undefined, version: 0 },
    dispatch: { submitFinal: () => [], submitBatched: async () => [], list: () => [], running: () => 0 },
    connector: {} as never,
    instance: () => ns,
    clock: systemClock,
    log,
  });
  const clients: MqttClient[] = [];
  try {
    fleet.start();
    while (!fleet.connected) await new Promise((r) => setTimeout(r, 10));
    const bare = await bareClient(broker, "site-002", GATEWAY_PASSWORD);
    clients.push(bare);
    const window = fleet.stats().telemetry_window;
    ctx.log(`telemetry window ${window} in flight (the broker's Receive Maximum, at most 64)`);
    const ours: number[] = [];
    const ref: number[] = [];
    const cpuOurs: number[] = [];
    const cpuRef: number[] = [];
    let bytes = 0;
    let seq = 0;
    for (let r = 0; r < rounds; r++) {
      // Ours: a backlog of n demo snapshots in the store, drained QoS 1, settled on PUBACK.
      for (let i = 0; i < n; i++) samples.append(snapshot(seq++, DEVICES));
      const stored = samples.pending(n, fleet.stats().telemetry_cursor);
      const last = stored[stored.length - 1].id;
      const t0 = performance.now();
      const c0 = process.cpuUsage();
      while (fleet.stats().telemetry_cursor < last) await new Promise((res) => setTimeout(res, 2));
      ours.push(n / ((performance.now() - t0) / 1000));
      const c1 = process.cpuUsage(c0);
      cpuOurs.push((c1.user + c1.system) / n);
      // Reference: bare MQTT.js, the same payloads, the same window, the same broker.
      const payloads = stored.map((s) => buildPayloads(s, config.site_id, ns)[0].body);
      bytes = payloads.reduce((a, p) => a + p.length, 0) / payloads.length;
      const c2 = process.cpuUsage();
      ref.push(await bareLoop(bare, "sitegate/site-002/telemetry", payloads, window));
      const c3 = process.cpuUsage(c2);
      cpuRef.push((c3.user + c3.system) / n);
      ctx.log(
        `round ${r + 1}: telemetry ours ${Math.round(ours[r])} / bare ${Math.round(ref[r])} msgs/s, CPU ${cpuOurs[r].toFixed(1)} / ${cpuRef[r].toFixed(1)} us per message`,
      );
    }
    rows.push({
      name: "fleet: telemetry QoS 1 from the store (demo snapshots)",
      value: median(ours),
      unit: "msgs/s",
      reference: median(ref),
      ratio: median(ours.map((o, i) => o / ref[i])),
      note: "bare MQTT.js QoS 1 loop, same window",
    });
    rows.push({
      name: "fleet: process CPU per telemetry message",
      value: median(cpuOurs),
      unit: "us",
      reference: median(cpuRef),
      ratio: median(cpuRef.map((c, i) => c / cpuOurs[i])),
      note: "the bare loop (lower is better)",
    });
    rows.push({ name: "fleet: telemetry message size (5 devices)", value: bytes, unit: "bytes", reference: null, ratio: null });

    // Commands: ping answered through the fleet part vs a bare echo responder.
    const m = ctx.quick ? 500 : 3000;
    const req = await bareClient(broker);
    const echo = await bareClient(broker, "site-002", GATEWAY_PASSWORD);
    const req2 = await bareClient(broker);
    clients.push(req, echo, req2);
    await echo.subscribeAsync("sitegate/site-002/cmd/#", { qos: 1 });
    echo.on("message", (_t, payload, packet) => {
      const rt = packet.properties?.responseTopic;
      if (rt) echo.publish(rt, payload, { qos: 1, properties: { correlationData: packet.properties?.correlationData } });
    });
    const oursCmd: number[] = [];
    const refCmd: number[] = [];
    for (let r = 0; r < rounds; r++) {
      oursCmd.push(await requestLoop(req, "sitegate/site-001/cmd/ping", "sitegate/site-001/reply/bench", m, 8));
      refCmd.push(await requestLoop(req2, "sitegate/site-002/cmd/ping", "sitegate/site-002/reply/bench", m, 8));
      ctx.log(`round ${r + 1}: commands ours ${Math.round(oursCmd[r])} / echo ${Math.round(refCmd[r])} per s`);
    }
    rows.push({
      name: "fleet: commands answered (ping, 8 outstanding)",
      value: median(oursCmd),
      unit: "cmds/s",
      reference: median(refCmd),
      ratio: median(oursCmd.map((o, i) => o / refCmd[i])),
      note: "bare MQTT.js echo responder",
    });
  } finally {
    await Promise.all(clients.map((c) => c.endAsync().catch(() => {})));
    await fleet.stop();
    samples.stop();
    storage.stop();
    await broker.stop();
  }
  return rows;
}

const bench: BenchFn = async (ctx) => {
  const { unit, plain } = flagSets();
  const self = import.meta.url;
  // Ours and the references under the unit's flags (the rows), then the same again with no
  // node flags: the bare loop's two figures are the flags' own cost.
  const flagged = await runInChild<BenchRow[]>(
    self,
    "fleetFigures",
    { quick: ctx.quick, dir: join(ctx.dir, "flags"), label: "unit's node flags" },
    unit,
  );
  const none = await runInChild<BenchRow[]>(
    self,
    "fleetFigures",
    { quick: ctx.quick, dir: join(ctx.dir, "plain"), label: "no node flags" },
    plain,
  );
  const tele = (rows: BenchRow[]) => rows.find((r) => r.name.startsWith("fleet: telemetry QoS 1"))!;
  const withFlags = tele(flagged).reference!;
  const without = tele(none).reference!;
  ctx.log(
    `telemetry with no node flags: ours ${Math.round(tele(none).value)} / bare ${Math.round(without)} msgs/s (${tele(none).ratio!.toFixed(2)}x)`,
  );
  return [
    ...flagged.map((r) => (r.note ? { ...r, note: `${r.note}, unit's node flags` } : r)),
    {
      name: "flags' own cost: bare MQTT.js QoS 1 loop, unit's node flags",
      value: withFlags,
      unit: "msgs/s",
      reference: without,
      ratio: withFlags / without,
      note: "the same loop, no node flags",
    },
  ];
};

export default bench;
