// Device sync against the simulator over real sockets: a relay with rated loads publishes
// their sum as device_max_power, and a device that stops answering stays listed with
// `telemetry` as its only capability (an inverter with device_op_mode 4), so a partner
// does not plan on it; it is offered again once it answers. The same for a GPIO line that
// cannot be read (the Zigbee cases are in zigbee-gateway.test.ts).
import { test } from "node:test";
import assert from "node:assert/strict";
import { tcpDevice, withSiteGateway, type Gateway } from "../support/gateway.js";
import type { ScenarioInput } from "../support/site.js";
import { siteDevices, siteScenario } from "../support/dispatch.js";
import { until } from "../support/wait.js";
import type { ConfigDevices } from "../../src/modbus/device/config-devices.js";
import type { SiteClock as Poller } from "../../src/telemetry/site-clock.js";

async function synced(gw: Gateway): Promise<Record<string, any>> {
  const sync = await gw.deviceSync();
  assert.equal(sync.status, 200, sync.text);
  return Object.fromEntries(sync.json.devices.map((d: { device_id: string }) => [d.device_id, d]));
}

test("device sync: a relay's rated loads are its device_max_power; an unreachable battery or relay stays listed for telemetry only, and comes back", async () => {
  await withSiteGateway(
    siteScenario(),
    (site) => ({ devices: siteDevices(site.tcpPorts[0], ["battery"], { relay: { rated_power_w: [400, 400, 400, 0] } }) as never }),
    async (site, gw) => {
      await gw.daemon.part<ConfigDevices>("config-devices").settled;
      const poller = gw.daemon.part<Poller>("poller");
      const online = (id: string) => poller.health(id)?.online === true;
      await until(() => ["battery", "pv", "grid", "relay"].every(online), "every device polled");
      const before = await synced(gw);
      assert.equal(before.relay.device_max_power, 1200, "the sum of the coils' rated loads");
      assert.deepEqual(before.relay.capabilities, ["telemetry", "shed", "restore"]);
      assert.equal(before.battery.device_max_power, 5000);
      assert.ok(before.battery.capabilities.includes("discharge"));
      assert.notEqual(before.battery.device_op_mode, 4);

      site.setFault({ device: "battery", fault: "no_answer" });
      site.setFault({ device: "relay", fault: "no_answer" });
      await until(() => !online("battery") && !online("relay"), "battery and relay unreachable", 30_000);
      const down = await synced(gw);
      assert.deepEqual(down.battery.capabilities, ["telemetry"]);
      assert.equal(down.battery.device_op_mode, 4);
      assert.equal(down.battery.device_max_power, 5000, "still listed as it is");
      assert.deepEqual(down.relay.capabilities, ["telemetry"]);
      assert.equal(down.relay.device_op_mode, undefined, "op mode is for inverters only");
      assert.deepEqual(down.pv.capabilities, before.pv.capabilities, "a device that answers is unchanged");
      assert.deepEqual(down.grid, before.grid);

      site.clearFaults("battery");
      site.clearFaults("relay");
      await until(() => online("battery") && online("relay"), "battery and relay answer again", 30_000);
      const back = await synced(gw);
      assert.deepEqual(back.battery.capabilities, before.battery.capabilities);
      assert.deepEqual(back.relay.capabilities, before.relay.capabilities);
      assert.notEqual(back.battery.device_op_mode, 4);
    },
  );
});

test("device sync: a relay without rated_power_w publishes no device_max_power", async () => {
  await withSiteGateway(
    siteScenario(),
    (site) => ({ devices: siteDevices(site.tcpPorts[0]) as never }),
    async (_site, gw) => {
      await gw.daemon.part<ConfigDevices>("config-devices").settled;
      await until(async () => (await synced(gw)).relay !== undefined, "relay paired");
      assert.equal((await synced(gw)).relay.device_max_power, undefined);
    },
  );
});

test("device sync: a GPIO output whose line cannot be read stays listed for telemetry only; one that works is offered for shed", async () => {
  const scenario = {
    seed: 7,
    control: { listen: "127.0.0.1:0" },
    site: { base_load_w: 2000, load_noise_pct: 0, pv_irradiance: 0 },
    ports: [{ kind: "tcp", listen: "127.0.0.1:0", devices: [{ unit: 3, model: "sunspec-meter", name: "grid" }] }],
    gpio: { lines: [{ line: 27, direction: "output", load_w: 3000, value: 1 }] },
  } as ScenarioInput;
  await withSiteGateway(
    scenario,
    (site) => ({
      devices: [tcpDevice("grid", site.tcpPorts[0], 3, "sunspec", { mb_device_type: 1 })] as never,
      gpio: {
        backend: "sim" as const,
        chip: site.controlUrl,
        lines: [
          { device_id: "boiler", line: 27, device_type: 41, rated_power_w: 3000 },
          // The chip has no line 5: every read of it fails, as with a line another process holds.
          { device_id: "heater", line: 5, device_type: 41, rated_power_w: 2000 },
        ],
      },
    }),
    async (_site, gw) => {
      const poller = gw.daemon.part<Poller>("poller");
      await until(() => poller.health("boiler")?.online === true, "the boiler's line read");
      const tried = () => poller.health("heater")?.last_error ?? "not read yet";
      await until(() => tried() !== "not read yet", "the heater's line tried");
      assert.equal(poller.health("heater")?.online, false, tried());
      assert.match(tried(), /line 5/);
      const sync = await synced(gw);
      assert.deepEqual(sync.boiler.capabilities, ["telemetry", "shed", "restore"]);
      assert.deepEqual(sync.heater.capabilities, ["telemetry"], "unavailable: not offered for shed");
      assert.equal(sync.heater.device_max_power, 2000, "still listed as configured");
    },
  );
});
