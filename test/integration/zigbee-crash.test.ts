// A thermostat set back by a shed, the daemon killed with -9 during the setback and
// started again after the event's end_time: the device ledger still holds the setpoint it
// had before, so the restarted daemon puts it back before its API listens (and never runs
// the event late).
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { Agent, request } from "undici";
import { withTmpDir } from "../support/tmp.js";
import { withSite } from "../support/site.js";
import { startLocalBroker } from "../support/mosquitto.js";
import { spawnDaemon, type DaemonProcess } from "../support/daemon-process.js";
import { event, startSink } from "../support/dispatch.js";
import { testCert } from "../support/tls.js";
import { TEST_API_KEY } from "../support/config.js";
import { until } from "../support/wait.js";
import { zigbeeConfig, zigbeeScenario } from "../support/zigbee-site.js";
import { partnerTo } from "../support/partner-sink.js";

async function post(url: string, body: unknown): Promise<number> {
  const agent = new Agent({ connect: { ca: testCert().cert } });
  try {
    const r = await request(`${url}/v1/api/gateway/site-001/dr`, {
      method: "POST",
      body: JSON.stringify(body),
      headers: { "content-type": "application/json", "x-api-key": TEST_API_KEY },
      dispatcher: agent,
    });
    await r.body.text();
    return r.statusCode;
  } finally {
    await agent.close();
  }
}

test("kill -9 during a thermostat setback, restart after end_time: the setpoint from before is put back", async () => {
  await withTmpDir(async (dir) => {
    const broker = await startLocalBroker(join(dir, "broker"));
    const sink = await startSink();
    try {
      await withSite(zigbeeScenario(broker.url), async (site) => {
        const trv = () => site.state().devices["living-trv"] as Record<string, any>;
        const z = zigbeeConfig(broker.url);
        const over = {
          telemetry: { poll_interval_ms: 250, retention_max_mb: 64, commit_interval_s: 1 },
          partner: partnerTo(sink),
          zigbee: { ...z, devices: (z.devices ?? []).filter((d) => d.device_id === "trv-1") },
        };
        const gwDir = join(dir, "gw");
        mkdirSync(gwDir);
        let d: DaemonProcess = await spawnDaemon(gwDir, over);
        try {
          const shed = event({ event_type: "shed", event_quantity: 1, event_unit: "kW", priority: 20 }, 1000, 6000);
          const end = Date.parse(shed.end_time);
          assert.equal(await post(d.url, { mode: "live", event_slots: [shed] }), 200);
          await until(() => trv().setpoint_c === 19, "setpoint set back to 19 °C");
          d.child.kill("SIGKILL");
          await new Promise((r) => d.child.once("exit", r));
          assert.equal(trv().setpoint_c, 19, "nobody put it back while the daemon was down");
          await until(() => Date.now() > end + 500, "the event's end_time passed");
          d = await spawnDaemon(gwDir, over);
          // Put back before the API listens, although the bridge's broker connects only after the start.
          assert.equal(trv().setpoint_c, 21, "setpoint put back to 21 °C before the API listens");
          const writes = trv().writes as Array<{ topic: string; payload: Record<string, unknown> }>;
          const sets = writes.filter((w) => w.topic.endsWith("/set")).map((w) => w.payload.occupied_heating_setpoint);
          assert.deepEqual(sets, [19, 21], "set back once, put back once: never set back twice");
        } finally {
          await d.stop();
        }
      });
    } finally {
      await sink.stop();
      await broker.stop();
    }
  });
});
