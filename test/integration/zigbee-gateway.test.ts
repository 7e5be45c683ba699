// The gateway's Zigbee side against the simulator acting as a zigbee2mqtt bridge on a real
// mosquitto: devices found by friendly name or IEEE address, their state messages as
// telemetry (latest values and the site tick's snapshots), availability, device sync.
import { test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { until } from "../support/wait.js";
import { startLocalBroker } from "../support/mosquitto.js";
import { simControl, withZigbeeGateway } from "../support/zigbee-site.js";
import type { SiteClock as Poller } from "../../src/telemetry/site-clock.js";
import type { SampleStore } from "../../src/telemetry/sample-store.js";
import { tickOffsetMs } from "../../src/telemetry/tick-offset.js";

test("zigbee devices report telemetry into the snapshots, show in device sync, and follow availability", async () => {
  await withZigbeeGateway({}, async (site, gw) => {
    const poller = gw.daemon.part<Poller>("poller");
    const samples = gw.daemon.part<SampleStore>("samples");
    const online = (id: string) => poller.health(id)?.online === true;
    await until(() => ["grid", "plug-1", "plug-2", "trv-1"].every(online), "every device online");

    // plug-1 is configured by IEEE address, the others by friendly name.
    await until(() => Math.abs((poller.latest("plug-1")?.power_w ?? 0) - 2000) < 50, "plug-1 reports its 2 kW load");
    const plug = poller.latest("plug-1")!;
    assert.equal(plug.state, 1);
    assert.equal(typeof plug.energy_import_wh, "number");
    assert.equal(typeof plug.voltage_v, "number");
    assert.equal(poller.latest("plug-2")?.state, 1);
    assert.equal(poller.latest("plug-2")?.power_w, undefined, "an unmetered plug reports no power");
    await until(() => poller.latest("trv-1")?.setpoint_c === 21, "the thermostat's setpoint");
    assert.equal(typeof poller.latest("trv-1")?.temperature_c, "number");

    // The readings join the site tick's snapshots next to the Modbus meter's (every stored
    // snapshot from the first: the push may settle them between two looks).
    type Snap = ReturnType<SampleStore["pending"]>[number];
    let snap: Snap | undefined;
    const has = (s: Snap, id: string) => s.devices.some((d) => d.device_id === id);
    await until(() => {
      snap = samples.pending(10_000, 0).find((s) => has(s, "plug-1") && has(s, "grid") && has(s, "trv-1"));
      return snap !== undefined;
    }, "a snapshot with plug-1, trv-1 and grid");
    if (!snap) throw new Error("unreachable");
    assert.equal(snap.ts % 250, tickOffsetMs("site-001", 250), "stamped with a tick of the site clock (its offset included)");
    assert.equal(snap.devices.find((d) => d.device_id === "trv-1")!.metrics.setpoint_c, 21);

    // Device sync lists them with their type codes, max power of switchable loads, capabilities.
    const sync = await gw.deviceSync();
    assert.equal(sync.status, 200);
    const byId = new Map<string, any>(sync.json.devices.map((d: { device_id: string }) => [d.device_id, d]));
    assert.equal(byId.get("plug-1").device_type, 30);
    assert.deepEqual(byId.get("plug-1").capabilities, ["telemetry", "shed", "restore"]);
    assert.equal(byId.get("plug-2").device_max_power, 1500);
    assert.equal(byId.get("trv-1").device_type, 31);
    assert.equal(byId.get("grid").device_type, 12);

    // A device the bridge reports offline is offline; the others stay online; it comes back.
    assert.equal((await simControl(site, "POST", "/faults", { device: "washer-plug", fault: "no_answer" })).status, 200);
    await until(() => !online("plug-1"), "plug-1 offline");
    assert.match(poller.health("plug-1")!.last_error ?? "", /offline/);
    assert.ok(online("plug-2") && online("trv-1") && online("grid"));
    await simControl(site, "DELETE", "/faults/washer-plug");
    await until(() => online("plug-1"), "plug-1 back online");
  });
});

test("the bridge going offline takes its devices offline and nothing else; so does the loss of its broker; both come back", async () => {
  await withZigbeeGateway({}, async (site, gw, broker, dir) => {
    const poller = gw.daemon.part<Poller>("poller");
    const zigbee = ["plug-1", "plug-2", "trv-1"];
    const online = (id: string) => poller.health(id)?.online === true;
    await until(() => ["grid", ...zigbee].every(online), "every device online");

    const gridReadAfter = async (what: string) => {
      const seen = poller.health("grid")!.last_ok_at;
      await until(() => poller.health("grid")!.last_ok_at !== seen && online("grid"), `the grid meter still polled ${what}`);
    };

    assert.equal((await simControl(site, "POST", "/zigbee/bridge", { state: "offline" })).status, 200);
    await until(() => zigbee.every((id) => !online(id)), "every zigbee device offline with the bridge");
    assert.match(poller.health("plug-2")!.last_error ?? "", /offline/);
    await gridReadAfter("while the bridge is offline");
    // Still listed, but offered for telemetry only: a partner does not plan a shed on them.
    const caps = async () => {
      const sync = await gw.deviceSync();
      assert.equal(sync.status, 200, "the API answers");
      return Object.fromEntries(sync.json.devices.map((d: { device_id: string; capabilities: string[] }) => [d.device_id, d.capabilities]));
    };
    const offered = await caps();
    for (const id of zigbee) assert.deepEqual(offered[id], ["telemetry"], `${id} without its bridge`);
    assert.deepEqual(offered.grid, ["telemetry"], "the meter as always");
    assert.equal((await simControl(site, "POST", "/zigbee/bridge", { state: "online" })).status, 200);
    await until(() => zigbee.every(online), "zigbee devices back with the bridge");
    assert.deepEqual((await caps())["plug-1"], ["telemetry", "shed", "restore"], "offered again with the bridge");

    await broker.stop();
    await until(() => zigbee.every((id) => !online(id)), "every zigbee device offline without the broker");
    await until(() => /broker/.test(poller.health("plug-1")!.last_error ?? ""), "the broker's loss named as the reason");
    const noBroker = await caps();
    for (const id of zigbee) assert.deepEqual(noBroker[id], ["telemetry"], `${id} without the broker`);
    await gridReadAfter("without the broker");
    const connected = async () => /^sitegate_zigbee_connected (\d)$/m.exec((await gw.call("GET", "/metrics")).text)?.[1];
    assert.equal(await connected(), "0");
    const again = await startLocalBroker(join(dir, "broker2"), { port: broker.port });
    try {
      await until(() => zigbee.every(online), "zigbee devices back with the broker", 30_000);
      assert.equal(await connected(), "1");
    } finally {
      await again.stop();
    }
  });
});
