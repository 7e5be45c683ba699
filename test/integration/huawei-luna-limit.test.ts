// A battery smaller than its inverter, through the real daemon: a 2.5 kW LUNA2000 on a
// 10 kW SUN2000 (the simulator's Huawei model publishes 2,500 W at 37046/37048 and refuses,
// exception 3, a forcible power above it at 47247/47249). A 4 kW discharge event is driven
// at the battery's limit: the battery delivers about 2.5 kW by the simulator's own truth,
// and the event is partial, not failed (a write of 4,000 W at 47249 would be refused).
import { test } from "node:test";
import assert from "node:assert/strict";
import { brandsScenario } from "../../hw-sim/models/brands/site.js";
import { event, makeRig, startSink, waitPaired, POLL_MS } from "../support/dispatch.js";
import { partnerTo } from "../support/partner-sink.js";
import { startGateway, tcpDevice } from "../support/gateway.js";
import { withSite, type ScenarioInput } from "../support/site.js";
import { withTmpDir } from "../support/tmp.js";
import { until } from "../support/wait.js";
import type { ConfigInput } from "../../src/config/schema.js";

function lunaOn10kW(): ScenarioInput {
  const sc = brandsScenario();
  return {
    ...sc,
    control: { listen: "127.0.0.1:0" },
    site: { ...sc.site, load_noise_pct: 0, pv_irradiance: 0 },
    ports: [
      {
        kind: "tcp",
        listen: "127.0.0.1:0",
        devices: [
          {
            unit: 2,
            model: "huawei-sun2000",
            name: "huawei",
            rated_power_w: 10_000,
            max_power_w: 2500,
            capacity_wh: 10_000,
            pv_max_w: 0,
            self_use_load_pct: 14,
          },
        ],
      },
    ],
  };
}

test("a 4 kW discharge on a 2.5 kW LUNA2000 behind a 10 kW SUN2000 delivers about 2.5 kW by the simulator's truth, and is not failed", async () => {
  const sink = await startSink();
  try {
    await withSite(lunaOn10kW(), (site) =>
      withTmpDir(async (dir) => {
        const devices = [tcpDevice("huawei", site.tcpPorts[0], 2, "huawei-sun2000", { mb_device_type: 3 })];
        const gw = await startGateway(dir, {
          partner: partnerTo(sink),
          telemetry: { poll_interval_ms: POLL_MS, retention_max_mb: 64, commit_interval_s: 1 },
          devices: devices as ConfigInput["devices"],
        });
        try {
          await waitPaired(gw, 1);
          const rig = makeRig(site, gw, sink, dir);
          const ev = event({ event_type: "discharge", event_quantity: 4000, event_unit: "w" }, 1500, 8000);
          const r = await rig.dr({ mode: "live", event_slots: [ev] });
          assert.equal(r.status, 200, JSON.stringify(r.json));

          const truth = () => site.state().devices.huawei!.power_w as number; // + discharging
          await until(() => truth() >= 2300, "the battery discharging at its limit by the simulator's truth", 20_000);
          const seen = [truth()];
          await until(() => (seen.push(truth()), seen.length >= 5), "a few readings of the truth");
          assert.ok(
            seen.every((w) => w <= 2600),
            `never above the battery's 2,500 W: ${seen.join(", ")}`,
          );

          const body = await rig.waitResponse(ev.event_id, 60_000);
          assert.notEqual(body.status, "failed", JSON.stringify(body));
          const d = body.details.devices.find((x: any) => x.device_id === "huawei");
          assert.ok(d, JSON.stringify(body));
          assert.ok(d.status !== "failed", JSON.stringify(d));
          assert.ok(d.delivered_w <= 2600, `delivered no more than the battery can: ${JSON.stringify(d)}`);
          assert.ok(d.delivered_w >= 0.85 * 2500 * body.details.coverage, `delivered about 2.5 kW: ${JSON.stringify(d)}`);
        } finally {
          await gw.stop();
        }
      }),
    );
  } finally {
    await sink.stop();
  }
});
