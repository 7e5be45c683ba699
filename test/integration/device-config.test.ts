// The API owns device configuration: the config file's devices are applied at start only
// when changed since last applied, and mb_device_type fills in what discovery cannot
// tell. Real simulator (its control API counts the writes), real daemon, real HTTPS.
import { test } from "node:test";
import assert from "node:assert/strict";
import { withTmpDir } from "../support/tmp.js";
import { withSite, tcpScenario, M124, type SimHandle } from "../support/site.js";
import { startGateway, tcpDevice, withSiteGateway, type Gateway } from "../support/gateway.js";
import type { ConfigDevices } from "../../src/modbus/device/config-devices.js";

/** The writes the simulator saw on one device, from its control API (GET /state). */
async function writesTo(site: SimHandle, name: string): Promise<Array<{ fn: number; address: number; values: number[] }>> {
  const res = await fetch(`${site.controlUrl}/state`);
  assert.equal(res.status, 200);
  const state = (await res.json()) as { devices: Record<string, { writes: Array<{ fn: number; address: number; values: number[] }> }> };
  return state.devices[name].writes;
}

async function synced(gw: Gateway): Promise<Record<string, { name?: string; device_type: number }>> {
  const sync = await gw.deviceSync();
  assert.equal(sync.status, 200, sync.text);
  return Object.fromEntries(sync.json.devices.map((d: { device_id: string }) => [d.device_id, d]));
}

test("config-file devices: an unchanged restart makes no check writes and keeps the API's change; a changed entry is applied", async () => {
  await withSite(tcpScenario(), async (site) => {
    await withTmpDir(async (dir) => {
      const port = site.tcpPorts[0];
      const entry = (name: string) =>
        tcpDevice("bat", port, 1, "sunspec", {
          device_name: name,
          mb_device_type: 3,
          mb_check_write: [{ reg_cmd_id: 1, reg_fun: 6, reg_reg: M124 + 2, reg_value: 4000 }],
        });
      /** A daemon start with this config entry, once its config devices are dealt with. */
      const boot = async (name: string) => {
        const gw = await startGateway(dir, { devices: [entry(name) as never] });
        await gw.daemon.part<ConfigDevices>("config-devices").settled;
        return gw;
      };

      let gw = await boot("from-config");
      try {
        assert.equal((await synced(gw)).bat?.name, "from-config");
        assert.equal((await writesTo(site, "battery")).length, 1, "the check write ran once");
        // The partner reconfigures the device through the API.
        const r = await gw.configure([tcpDevice("bat", port, 1, "sunspec", { device_name: "from-api", mb_device_type: 3 })]);
        assert.equal(r.json.devices[0].status, "accepted", r.text);
      } finally {
        await gw.stop();
      }

      gw = await boot("from-config"); // the same config file
      try {
        assert.equal((await synced(gw)).bat?.name, "from-api", "an unchanged config does not overwrite the API's configuration");
        assert.equal((await writesTo(site, "battery")).length, 1, "no check write on an unchanged restart");
      } finally {
        await gw.stop();
      }

      gw = await boot("from-config-v2"); // the entry changed
      try {
        assert.equal((await synced(gw)).bat?.name, "from-config-v2");
        const writes = await writesTo(site, "battery");
        assert.deepEqual(
          writes.map((w) => [w.fn, w.address, w.values[0]]),
          [
            [6, M124 + 2, 4000],
            [6, M124 + 2, 4000],
          ],
          "the changed entry ran its check write",
        );
      } finally {
        await gw.stop();
      }
    });
  });
});

test("mb_device_type decides the type of a SunSpec device with only model 1; a disagreement is accepted with a message", async () => {
  const scenario = tcpScenario();
  const tcp = scenario.ports[0];
  scenario.ports = [{ ...tcp, devices: [...tcp.devices, { unit: 4, model: "sunspec-common", name: "box" }] } as typeof tcp];
  await withSiteGateway(scenario, async (site, gw) => {
    const port = site.tcpPorts[0];
    const r = await gw.configure([
      tcpDevice("box-1", port, 4, "sunspec", { mb_device_type: 1 }),
      tcpDevice("bat-1", port, 1, "sunspec", { mb_device_type: 1 }),
      tcpDevice("pv-1", port, 2, "sunspec", { mb_device_type: 2 }),
    ]);
    assert.equal(r.status, 200, r.text);
    const [box, bat, pv] = r.json.devices as Array<{ status: string; message: string }>;
    assert.equal(box.status, "accepted", box.message);
    assert.match(box.message, /device_type 12 from mb_device_type 1 \(meter\): the device does not tell its type/);
    assert.equal(bat.status, "accepted", bat.message);
    assert.match(
      bat.message,
      /mb_device_type 1 \(meter\) disagrees with the device, which reports itself as storage inverter; device_type 10 is used/,
    );
    assert.equal(pv.status, "accepted");
    assert.doesNotMatch(pv.message, /mb_device_type/);
    const devs = await synced(gw);
    assert.equal(devs["box-1"].device_type, 12);
    assert.equal(devs["bat-1"].device_type, 10);
    assert.equal(devs["pv-1"].device_type, 11);
  });
});

test("a config-file device that does not answer at start is paired once it does, without a restart", async () => {
  await withSite(tcpScenario(), async (site) => {
    await withTmpDir(async (dir) => {
      site.setFault({ device: "battery", fault: "no_answer" });
      const gw = await startGateway(dir, { devices: [tcpDevice("bat", site.tcpPorts[0], 1, "sunspec", { mb_device_type: 3 }) as never] });
      try {
        await gw.daemon.part<ConfigDevices>("config-devices").settled;
        assert.equal((await synced(gw)).bat, undefined, "not paired while it does not answer");
        site.clearFaults("battery");
        const { until } = await import("../support/wait.js");
        await until(async () => (await synced(gw)).bat !== undefined, "paired on a retry", 30_000);
      } finally {
        await gw.stop();
      }
    });
  });
});

test("a config-file device still being retried gives way when the partner configures the same device_id", async () => {
  await withSite(tcpScenario(), async (site) => {
    await withTmpDir(async (dir) => {
      const port = site.tcpPorts[0];
      site.setFault({ device: "battery", fault: "no_answer" });
      const gw = await startGateway(dir, {
        devices: [tcpDevice("bat", port, 1, "sunspec", { device_name: "from-config", mb_device_type: 3 }) as never],
      });
      try {
        await gw.daemon.part<ConfigDevices>("config-devices").settled; // first try failed: a retry in 5 s
        // Meanwhile the partner configures device_id "bat" itself, on unit 2.
        const r = await gw.configure([tcpDevice("bat", port, 2, "sunspec", { device_name: "from-api" })]);
        assert.equal(r.json.devices[0].status, "accepted", r.text);
        site.clearFaults("battery"); // the config file's unit answers from now on
        const requests = async () =>
          ((await (await fetch(`${site.controlUrl}/state`)).json()) as { devices: Record<string, { requests: number }> }).devices.battery
            .requests;
        const before = await requests();
        // No event tells that a retry found nothing to do: wait out the retry timer (5 s, the
        // first of the config devices' backoff) and a little more.
        await new Promise((r) => setTimeout(r, 7000));
        assert.equal(await requests(), before, "the config file's unit 1 is never asked again");
        assert.equal((await synced(gw)).bat?.name, "from-api", "the partner's configuration stays");
      } finally {
        await gw.stop();
      }
    });
  });
});
