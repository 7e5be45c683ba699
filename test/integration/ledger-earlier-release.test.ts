// A gateway updated while an earlier release had devices shed (killed mid-event, then
// updated): its ledger rows hold the pre-states as that release wrote them, a GPIO output's
// in the register form those devices had then (coil 0) and a Modbus relay's as raw coils.
// The updated gateway starts, releases what no running event drives, and puts both back:
// checked against the simulator's truth (the line's level, the relay's coils), never the
// gateway's claims.
import { test } from "node:test";
import assert from "node:assert/strict";
import Database from "better-sqlite3";
import { until } from "../support/wait.js";
import { withSite, type ScenarioInput, type SimHandle } from "../support/site.js";
import { withTmpDir } from "../support/tmp.js";
import { startGateway, tcpDevice } from "../support/gateway.js";
import { waitPaired } from "../support/dispatch.js";
import type { SiteClock } from "../../src/telemetry/site-clock.js";

function scenario(): ScenarioInput {
  return {
    seed: 11,
    control: { listen: "127.0.0.1:0" },
    site: { base_load_w: 2000, load_noise_pct: 0 },
    ports: [{ kind: "tcp", listen: "127.0.0.1:0", devices: [{ unit: 12, model: "relay", name: "relay", coils: 4, load_per_coil_w: 400 }] }],
    gpio: { lines: [{ line: 27, direction: "output", load_w: 3000, value: 1 }] },
  } as ScenarioInput;
}

async function post(site: SimHandle, path: string, body: unknown): Promise<void> {
  const res = await fetch(`${site.controlUrl}${path}`, {
    method: "POST",
    body: JSON.stringify(body),
    headers: { "content-type": "application/json" },
  });
  assert.equal(res.status, 200, `${path}: ${await res.text()}`);
}

const state = (site: SimHandle) =>
  site.state() as unknown as { gpio: Record<string, { value: number }>; devices: Record<string, { coils: boolean[] }> };

test("ledger rows an earlier release wrote (a GPIO output's register form, a relay's raw coils) put the devices back after the update", async () => {
  await withSite(scenario(), (site) =>
    withTmpDir(async (dir) => {
      const config: Parameters<typeof startGateway>[1] = {
        devices: [tcpDevice("relay", site.tcpPorts[0]!, 12, "relay-coils")] as never,
        gpio: { backend: "sim", chip: site.controlUrl, lines: [{ device_id: "boiler", line: 27, device_type: 41, rated_power_w: 3000 }] },
      };
      let gw = await startGateway(dir, config);
      let dbFile: string;
      try {
        await waitPaired(gw, 2);
        dbFile = gw.daemon.storage.db.name;
      } finally {
        await gw.stop();
      }

      // What the earlier release left behind: both loads off, its rows in the form it wrote them.
      await post(site, "/gpio/27/output", { value: 0 });
      await post(site, "/devices/relay", { coils: [false, false, false, false] });
      assert.equal(state(site).gpio["27"]!.value, 0);
      const db = new Database(dbFile);
      const put = db.prepare(
        "INSERT INTO dp_ledger (device_id, holders, actions, pre, created_at, updated_at) VALUES (?, '[\"e-earlier\"]', '[\"shed\"]', ?, 1, 1)",
      );
      put.run("boiler", JSON.stringify([{ table: "coil", address: 0, words: [], coils: [true] }]));
      put.run("relay", JSON.stringify([{ table: "coil", address: 0, words: [], coils: [true, true, false, true] }]));
      db.close();

      gw = await startGateway(dir, config);
      try {
        await until(() => state(site).gpio["27"]!.value === 1, "the simulator's boiler line back on");
        await until(() => state(site).devices.relay!.coils.join() === "true,true,false,true", "the simulator's relay coils as they were");
        const rows = () => (gw.daemon.storage.db.prepare("SELECT COUNT(*) AS n FROM dp_ledger").get() as { n: number }).n;
        await until(() => rows() === 0, "the ledger rows gone once the devices read back");
        const poller = gw.daemon.part<SiteClock>("poller");
        await until(() => poller.latest("boiler")?.state === 1, "the gateway reads the boiler on");
      } finally {
        await gw.stop();
      }
    }),
  );
});
