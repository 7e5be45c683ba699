// Points a role needs and points a device leaves silent, against the simulator over real
// sockets, through the daemon's pairing and polling:
// - a SunSpec storage device whose model chain has no inverter model (no AC power, which a
//   battery cannot do without) is refused at pairing by the point's name; the same device
//   with its inverter model pairs;
// - a Sungrow whose first planned read block (the EMS mode, holding 13049) never answers
//   while its other blocks do stays online: the EMS mode is listed unavailable, the rest
//   is read as the simulator holds it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { request } from "undici";
import type { ScenarioInput } from "../support/site.js";
import { tcpDevice, withSiteGateway } from "../support/gateway.js";
import { uiAgent, uiSession } from "../support/ui-session.js";
import { until } from "../support/wait.js";

function storages(): ScenarioInput {
  const storage = { model: "sunspec-storage", max_power_w: 5000, capacity_wh: 10000, soc_pct: 50 };
  return {
    seed: 5,
    control: { listen: "127.0.0.1:0" },
    site: { base_load_w: 2000, load_noise_pct: 0, pv_irradiance: 0 },
    ports: [
      {
        kind: "tcp",
        listen: "127.0.0.1:0",
        devices: [
          { ...storage, unit: 1, name: "no_inverter_model", omit_models: [103] },
          { ...storage, unit: 2, name: "complete" },
        ],
      },
    ],
  } as ScenarioInput;
}

test("a SunSpec storage device without an inverter model (no power_w) is refused at pairing by name; with it, it pairs", async () => {
  await withSiteGateway(storages(), async (site, gw) => {
    const port = site.tcpPorts[0];
    const r = await gw.configure([tcpDevice("bat-1", port, 1, "sunspec", { mb_device_type: 3 }), tcpDevice("bat-2", port, 2, "sunspec")]);
    assert.equal(r.status, 200, r.text);
    const [one, two] = r.json.devices as Array<{ device_id: string; status: string; code?: string; message: string }>;
    assert.deepEqual([one!.status, one!.code], ["error", "PAIRING_FAILED"], JSON.stringify(one));
    assert.match(one!.message, /unit 1 lacks power_w, which a battery requires: the SunSpec device lists models 1, 120, 123, 124/);
    assert.match(one!.message, /reads power_w from model 101, 102, 103, 111, 112, 113/);
    assert.equal(two!.status, "accepted", JSON.stringify(two));
    const sync = await gw.deviceSync();
    assert.deepEqual(
      (sync.json.devices as Array<{ device_id: string }>).map((d) => d.device_id),
      ["bat-2"],
      "the refused device is not stored",
    );
  });
});

function sungrow(): ScenarioInput {
  return {
    seed: 3,
    control: { listen: "127.0.0.1:0" },
    site: { base_load_w: 2000, load_noise_pct: 0, pv_irradiance: 0 },
    ports: [
      {
        kind: "tcp",
        listen: "127.0.0.1:0",
        devices: [
          {
            model: "sungrow-sh",
            unit: 1,
            name: "bat",
            rated_power_w: 10000,
            max_power_w: 5000,
            capacity_wh: 9600,
            soc_pct: 60,
            pv_max_w: 6000,
          },
        ],
      },
    ],
  } as ScenarioInput;
}

test("a Sungrow whose first planned block (EMS mode, holding 13049) stays silent is paired and polled online, the EMS mode listed unavailable", async () => {
  await withSiteGateway(
    sungrow(),
    (site) => {
      site.setFault({ device: "bat", fault: "no_answer_at", table: "holding", address: 13049 });
      return {
        ui: { enabled: true },
        telemetry: { poll_interval_ms: 500, retention_max_mb: 64 },
        devices: [tcpDevice("bat", site.tcpPorts[0], 1, "sungrow-sh")] as never,
      };
    },
    async (site, gw) => {
      const cookie = await uiSession(gw.url);
      type Row = { device_id: string; online: boolean; metrics: Record<string, number>; unavailable_points?: string[] };
      const bat = async (): Promise<Row | undefined> => {
        const r = await request(`${gw.url}/ui/api/devices`, { headers: { cookie }, dispatcher: uiAgent });
        return ((await r.body.json()) as { devices: Row[] }).devices.find((d) => d.device_id === "bat");
      };
      await until(async () => (await bat())?.online === true, "the device online despite its silent first block", 30_000);
      const row = (await bat())!;
      assert.deepEqual(row.unavailable_points, ["ems_mode"]);
      assert.ok(!("ems_mode" in row.metrics), JSON.stringify(row.metrics));
      const truth = (site.state().devices.bat as { soc_pct: number }).soc_pct;
      assert.ok(Math.abs(row.metrics.soc_pct! - truth) <= 0.5, `soc ${row.metrics.soc_pct} vs the simulator's ${truth}`);
    },
  );
});
