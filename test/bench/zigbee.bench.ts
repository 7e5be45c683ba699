// A Zigbee reading's way into SQLite: a zigbee2mqtt state message for a metered plug,
// published on a real mosquitto, until the sample that carries it is committed (the
// gateway in this process, commit_interval_s 1, poll 250 ms), against a bare MQTT.js
// subscriber on the same broker receiving the same message. The gateway puts a reading into
// the snapshot of the next site tick (one snapshot per tick, DESIGN B6), so up to one poll
// interval of the figure is that wait, by design.
import { connectAsync } from "mqtt";
import type { BenchFn } from "./types.js";
import { withZigbeeGateway, zigbeeScenario, Z2M_BASE } from "../support/zigbee-site.js";
import type { SampleStore } from "../../src/telemetry/sample-store.js";

const POLL_MS = 250;
const percentile = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];

const bench: BenchFn = async (ctx) => {
  const n = ctx.quick ? 20 : 100;
  const ours: number[] = [];
  const bare: number[] = [];
  await withZigbeeGateway(
    // No periodic reports from the simulated plug: only the bench's messages carry readings.
    { scenario: (broker) => ({ ...zigbeeScenario(broker), zigbee: { ...zigbeeScenario(broker).zigbee!, report_interval_s: 3600 } }) },
    async (_site, gw, broker) => {
      const samples = gw.daemon.part<SampleStore>("samples");
      const topic = `${Z2M_BASE}/washer-plug`;
      const sub = await connectAsync(broker.url);
      const pub = await connectAsync(broker.url);
      try {
        await sub.subscribeAsync(topic, { qos: 0 });
        let want = -1;
        let sentAt = 0;
        let bareAt = 0;
        let oursAt = 0;
        sub.on("message", (_t, payload) => {
          if ((JSON.parse(payload.toString()) as { power?: number }).power === want) bareAt = performance.now();
        });
        gw.daemon.events.on("samples_appended", "test", () => {
          const [snap] = samples.pending(1, samples.stats().push_cursor + samples.stats().pending_snapshots - 1);
          if (snap?.devices.find((d) => d.device_id === "plug-1")?.metrics.power_w === want && !oursAt) oursAt = performance.now();
        });
        try {
          // Ready: the gateway has the plug (bridge/devices read, its topic subscribed, a first state).
          const ready = performance.now() + 20_000;
          const has = () =>
            samples
              .pending(1, samples.stats().push_cursor + samples.stats().pending_snapshots - 1)[0]
              ?.devices.some((d) => d.device_id === "plug-1");
          while (!has()) {
            if (performance.now() > ready) throw new Error("the gateway never reported the plug");
            await new Promise((r) => setTimeout(r, 50));
          }
          for (let i = 0; i < n; i++) {
            // Spread the messages over the tick (each loop starts right after a tick otherwise).
            await new Promise((r) => setTimeout(r, (i * 97) % POLL_MS));
            want = 1000 + i;
            bareAt = oursAt = 0;
            sentAt = performance.now();
            await pub.publishAsync(
              topic,
              JSON.stringify({ state: "ON", power: want, energy: 1.5, voltage: 230, current: want / 230, linkquality: 120 }),
            );
            const deadline = sentAt + 10 * POLL_MS + 2000;
            while ((!oursAt || !bareAt) && performance.now() < deadline) await new Promise((r) => setTimeout(r, 5));
            if (!oursAt || !bareAt)
              throw new Error(`message ${i} (power ${want}) not seen: gateway ${oursAt > 0}, bare subscriber ${bareAt > 0}`);
            ours.push(oursAt - sentAt);
            bare.push(bareAt - sentAt);
          }
        } finally {
          gw.daemon.events.off("test");
        }
      } finally {
        await sub.endAsync();
        await pub.endAsync();
      }
    },
  );
  const o50 = percentile(ours, 50);
  const o99 = percentile(ours, 99);
  const b50 = percentile(bare, 50);
  const b99 = percentile(bare, 99);
  ctx.log(
    `${n} state messages: in SQLite p50 ${o50.toFixed(1)} ms, p99 ${o99.toFixed(1)} ms (poll ${POLL_MS} ms); bare subscriber p50 ${b50.toFixed(2)} ms, p99 ${b99.toFixed(2)} ms`,
  );
  const note = `a bare MQTT.js subscriber on the same broker (lower is better; ours waits for the next ${POLL_MS} ms tick)`;
  return [
    { name: "zigbee state message to the sample in SQLite p50", value: o50, unit: "ms", reference: b50, ratio: b50 / o50, note },
    { name: "zigbee state message to the sample in SQLite p99", value: o99, unit: "ms", reference: b99, ratio: b99 / o99, note },
  ];
};
export default bench;
