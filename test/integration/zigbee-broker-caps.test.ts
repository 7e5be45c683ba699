// A broker message can crash-loop no daemon (issue 40): a retained zigbee2mqtt
// `bridge/devices` of 4 MiB (about 1.4 M `{}`) on a real mosquitto, the daemon as its own
// process under the unit's node flags (96 MiB old space). Before, JSON.parse of the list
// ran the heap out within seconds, and the retained message did it again on every start.
// Now every message is bounded before it is parsed: the list is refused by its size, by
// its count of devices or by its count of objects, counted in
// sitegate_zigbee_rejected_total, and the daemon goes on (and starts again) with it retained.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { Agent, request } from "undici";
import { connectAsync } from "mqtt";
import { withTmpDir } from "../support/tmp.js";
import { startLocalBroker } from "../support/mosquitto.js";
import { spawnDaemon, type DaemonProcess } from "../support/daemon-process.js";
import { testCert } from "../support/tls.js";
import { until } from "../support/wait.js";
import { Z2M_BASE, zigbeeConfig } from "../support/zigbee-site.js";
import { MAX_DEVICES, MAX_DEVICES_BYTES } from "../../src/zigbee/state.js";

/** `[{},{},...]` of just under `bytes` (a packet of the old 4 MiB limit still carries it). */
function emptyObjects(bytes: number): Buffer {
  const n = Math.floor((bytes - 2) / 3);
  return Buffer.from(`[${"{},".repeat(n - 1)}{}]`);
}

async function rejected(d: DaemonProcess, reason: string): Promise<number> {
  const agent = new Agent({ connect: { ca: testCert().cert } });
  try {
    const r = await request(`${d.url}/metrics`, { dispatcher: agent });
    const text = await r.body.text();
    const line = text.split("\n").find((l) => l.startsWith(`sitegate_zigbee_rejected_total{reason="${reason}"} `));
    return line ? Number(line.split(" ")[1]) : 0;
  } finally {
    await agent.close();
  }
}

/** Until the daemon counted `n` refusals of `reason`; fails at once when it died. */
async function refusedAlive(d: DaemonProcess, reason: string, n = 1): Promise<void> {
  await until(
    async () => {
      // A request the dying daemon resets counts as nothing yet: its exit decides.
      const count = await rejected(d, reason).catch(() => 0);
      if (!d.alive()) throw new Error(`the daemon died (exit ${d.child.exitCode}, signal ${d.child.signalCode})`);
      return count >= n;
    },
    `the daemon refused ${n} message(s) (${reason})`,
    60_000,
  );
}

const device = (i: number) => ({ ieee_address: `0x${i.toString(16).padStart(16, "0")}`, friendly_name: `dev-${i}`, type: "Router" });

test("a retained 4 MiB bridge/devices of 1.4 M {} is refused unparsed under the unit's node flags: the daemon stays up, starts again with it retained, and takes a real list after", async () => {
  await withTmpDir(async (dir) => {
    const broker = await startLocalBroker(join(dir, "broker"));
    const pub = await connectAsync(broker.url, { reconnectPeriod: 0 });
    try {
      const topic = `${Z2M_BASE}/bridge/devices`;
      const huge = emptyObjects(4 * 1024 * 1024 - 256);
      await pub.publishAsync(topic, huge, { qos: 1, retain: true });
      const over = { zigbee: zigbeeConfig(broker.url) };
      for (const run of [1, 2]) {
        const gwDir = join(dir, `gw-${run}`);
        mkdirSync(gwDir);
        const d = await spawnDaemon(gwDir, over);
        try {
          await refusedAlive(d, "too_large");
          if (run === 2) {
            // Within 1 MiB but over the caps of devices, and of objects within one device.
            const many = Buffer.from(JSON.stringify(Array.from({ length: MAX_DEVICES + 1 }, (_, i) => device(i))));
            await pub.publishAsync(topic, many, { qos: 1, retain: true });
            await refusedAlive(d, "too_many_devices", 1);
            const nested = Buffer.from(
              JSON.stringify([{ ...device(1), definition: { exposes: JSON.parse(emptyObjects(MAX_DEVICES_BYTES - 200).toString()) } }]),
            );
            await pub.publishAsync(topic, nested, { qos: 1, retain: true });
            await refusedAlive(d, "too_many_devices", 2);
            // A real list is taken: the connection stayed and the list is read again.
            await pub.publishAsync(
              topic,
              JSON.stringify([{ ieee_address: "0x00158d0001a2b3c4", friendly_name: "washer-plug", type: "Router" }]),
              {
                qos: 1,
                retain: true,
              },
            );
            await until(
              () => d.lines.some((l) => l.msg === "zigbee device found" && l.device_id === "plug-1"),
              "plug-1 found in a real list",
            );
          }
          const warned = d.lines.filter((l) => typeof l.msg === "string" && l.msg.startsWith("zigbee2mqtt message dropped"));
          assert.ok(warned.length >= 1 && warned.length <= 2, `one line a minute for oversized messages: ${warned.length}`);
          assert.ok(d.alive());
        } finally {
          await d.stop();
        }
        assert.equal(d.child.exitCode, 0, "a clean stop");
        await pub.publishAsync(topic, huge, { qos: 1, retain: true });
      }
    } finally {
      await pub.endAsync();
      await broker.stop();
    }
  });
});
