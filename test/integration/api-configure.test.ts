// Device configuration and device sync against the real simulator, over real HTTPS.
import { test } from "node:test";
import assert from "node:assert/strict";
import { withTmpDir } from "../support/tmp.js";
import { withSite, demoScenario, tcpScenario, M124 } from "../support/site.js";
import { startGateway, tcpDevice, rtuDevice, withSiteGateway } from "../support/gateway.js";
import { waitPaired } from "../support/dispatch.js";
import { brandsOnTcp } from "../support/brands.js";

test("configure pairs devices, reports per device, and device sync lists the fully configured ones", async () => {
  await withSiteGateway(tcpScenario(), async (site, gw) => {
    const port = site.tcpPorts[0];
    const r = await gw.configure([
      tcpDevice("battery-1", port, 1, "sunspec", {
        mb_device_type: 3,
        mb_check_write: [{ reg_cmd_id: 1, reg_fun: 6, reg_reg: M124 + 2, reg_value: 4000 }],
      }),
      tcpDevice("pv-1", port, 2, "sunspec", { mb_device_type: 2 }),
      tcpDevice("ghost", port, 9, "sunspec"),
      tcpDevice("meter-ro", port, 3, "sunspec", { mb_check_write: [{ reg_cmd_id: 7, reg_fun: 6, reg_reg: 40088, reg_value: 1 }] }),
    ]);
    assert.equal(r.status, 200, r.text);
    const by: Record<string, any> = Object.fromEntries((r.json.devices as Array<{ device_id: string }>).map((d) => [d.device_id, d]));
    assert.deepEqual(
      r.json.devices.map((d: { device_id: string }) => d.device_id),
      ["battery-1", "pv-1", "ghost", "meter-ro"],
      "results in request order",
    );
    assert.equal(by["battery-1"].status, "accepted");
    assert.equal(by["battery-1"].code, undefined);
    assert.equal(by["pv-1"].status, "accepted");
    assert.deepEqual([by.ghost.status, by.ghost.code], ["error", "PAIRING_FAILED"]);
    assert.deepEqual([by["meter-ro"].status, by["meter-ro"].code], ["error", "REGISTRY_WRITE_FAILED"]);
    assert.match(by["meter-ro"].message, /reg|exception 2/i);
    // The check write physically happened on the battery.
    const writes = site.state().devices.battery.writes as Array<{ fn: number; address: number; values: number[] }>;
    assert.deepEqual(
      writes.map((w) => [w.fn, w.address, w.values[0]]),
      [[6, M124 + 2, 4000]],
    );

    const sync = await gw.deviceSync();
    assert.equal(sync.status, 200, sync.text);
    assert.equal(sync.json.site_id, "site-001");
    const devs: Record<string, any> = Object.fromEntries((sync.json.devices as Array<{ device_id: string }>).map((d) => [d.device_id, d]));
    assert.deepEqual(Object.keys(devs).sort(), ["battery-1", "pv-1"], "only fully configured devices are listed");
    assert.equal(devs["battery-1"].device_type, 10);
    assert.equal(devs["battery-1"].device_max_power, 5000);
    assert.deepEqual(devs["battery-1"].capabilities, ["telemetry", "charge", "discharge"]);
    assert.equal(devs["battery-1"].name, "battery-1");
    assert.ok([0, 1, 3].includes(devs["battery-1"].device_op_mode));
    assert.equal(devs["pv-1"].device_type, 11);
    assert.equal(devs["pv-1"].device_max_power, 6000);
  });
});

test("no-answer and writes that do not stick fail per device; a retry of only those succeeds without duplicates", async () => {
  await withSiteGateway(tcpScenario(), async (site, gw) => {
    const port = site.tcpPorts[0];
    const auth = { authorization: `Bearer ${await gw.token()}` };
    site.setFault({ device: "pv", fault: "no_answer" });
    site.setFault({ device: "battery", fault: "ignore_writes" });
    const battery = tcpDevice("battery-1", port, 1, "sunspec", {
      mb_check_write: [{ reg_cmd_id: 3, reg_fun: 6, reg_reg: M124 + 2, reg_value: 3000 }],
    });
    const devices = [battery, tcpDevice("pv-1", port, 2), tcpDevice("grid-1", port, 3)];
    const first = await gw.configure(devices, auth);
    assert.equal(first.status, 200);
    assert.deepEqual(
      first.json.devices.map((d: { status: string; code?: string }) => d.code ?? d.status),
      ["REGISTRY_WRITE_FAILED", "PAIRING_FAILED", "accepted"],
    );
    assert.match(first.json.devices[0].message, /did not stick/);
    const sync1 = await gw.deviceSync();
    assert.deepEqual(
      sync1.json.devices.map((d: { device_id: string }) => d.device_id),
      ["grid-1"],
    );

    site.clearFaults();
    const retry = await gw.configure([battery, tcpDevice("pv-1", port, 2)], auth);
    assert.deepEqual(
      retry.json.devices.map((d: { status: string }) => d.status),
      ["accepted", "accepted"],
    );
    const sync2 = await gw.deviceSync();
    assert.deepEqual(
      sync2.json.devices.map((d: { device_id: string }) => d.device_id),
      ["battery-1", "grid-1", "pv-1"],
    );
    // The same configuration again: still one entry per device.
    await gw.configure([tcpDevice("grid-1", port, 3)], auth);
    const sync3 = await gw.deviceSync();
    assert.equal(sync3.json.devices.length, 3);
  });
});

test("a failed re-pairing keeps the previous configuration in force", async () => {
  await withSiteGateway(tcpScenario(), async (site, gw) => {
    const port = site.tcpPorts[0];
    const auth = { authorization: `Bearer ${await gw.token()}` };
    assert.equal(
      (await gw.configure([tcpDevice("m", port, 3, "sunspec", { device_name: "first" })], auth)).json.devices[0].status,
      "accepted",
    );
    const again = await gw.configure([tcpDevice("m", port, 7, "sunspec", { device_name: "second" })], auth);
    assert.equal(again.json.devices[0].code, "PAIRING_FAILED");
    const sync = await gw.deviceSync();
    assert.equal(sync.json.devices[0].name, "first");
  });
});

test("RTU devices pair over the pty, and a restart keeps the registry", async () => {
  await withSite(demoScenario(), async (site) => {
    await withTmpDir(async (dir) => {
      const over = { rtu_ports: { "1": site.rtuPeers[0] } };
      let gw = await startGateway(dir, over);
      try {
        const r = await gw.configure([
          rtuDevice("sdm-1", 10, "sdm630"),
          rtuDevice("relay-1", 11, "relay-coils"),
          tcpDevice("bat", site.tcpPorts[0], 1),
        ]);
        assert.deepEqual(
          r.json.devices.map((d: { status: string }) => d.status),
          ["accepted", "accepted", "accepted"],
          r.text,
        );
      } finally {
        await gw.stop();
      }
      gw = await startGateway(dir, over);
      try {
        const sync = await gw.deviceSync();
        const types = Object.fromEntries(
          sync.json.devices.map((d: { device_id: string; device_type: number }) => [d.device_id, d.device_type]),
        );
        assert.deepEqual(types, { bat: 10, "relay-1": 14, "sdm-1": 12 });
      } finally {
        await gw.stop();
      }
    });
  });
});

test("devices in the config file are configured at start", async () => {
  await withSiteGateway(
    tcpScenario(),
    (site) => ({ devices: [tcpDevice("grid-cfg", site.tcpPorts[0], 3) as never] }),
    async (_site, gw) => {
      await waitPaired(gw, 1);
      const sync = await gw.deviceSync();
      assert.deepEqual(
        sync.json.devices.map((d: { device_id: string }) => d.device_id),
        ["grid-cfg"],
      );
    },
  );
});

test("configure refuses a brand profile whose identity registers answer with another device's values, naming the register and the value read; SunSpec pairs as before", async () => {
  await withSiteGateway(brandsOnTcp(), async (site, gw) => {
    const port = site.tcpPorts[0];
    const r = await gw.configure([
      tcpDevice("sungrow-on-goodwe", port, 247, "sungrow-sh", { mb_device_type: 3 }),
      tcpDevice("sdm72-on-sdm120", port, 11, "sdm72", { mb_device_type: 1 }),
      tcpDevice("deye-on-1p", port, 5, "deye-hybrid", { mb_device_type: 3 }),
      tcpDevice("goodwe", port, 247, "goodwe-et", { mb_device_type: 3 }),
      tcpDevice("solaredge-sunspec", port, 3, "sunspec", { mb_device_type: 3 }),
    ]);
    assert.equal(r.status, 200, r.text);
    const by: Record<string, any> = Object.fromEntries((r.json.devices as Array<{ device_id: string }>).map((d) => [d.device_id, d]));
    for (const id of ["sungrow-on-goodwe", "sdm72-on-sdm120", "deye-on-1p"])
      assert.deepEqual([by[id].status, by[id].code], ["error", "PAIRING_FAILED"], JSON.stringify(by[id]));
    // The GoodWe has no Sungrow registers at all: refused as not answering them.
    assert.match(by["sungrow-on-goodwe"].message, /^device did not respond as sungrow-sh: read unit 247 input 4989\+10: exception 2/);
    assert.match(
      by["sdm72-on-sdm120"].message,
      /^device is not sdm72: identity register meter_code \(holding 64514, unit 11\) reads 32, the profile expects one of 132, 137/,
    );
    assert.match(
      by["deye-on-1p"].message,
      /^device is not deye-hybrid: identity register device_type \(holding 0, unit 5\) reads \d+, the profile expects one of 5\b/,
    );
    assert.equal(by.goodwe.status, "accepted", JSON.stringify(by.goodwe));
    assert.equal(by["solaredge-sunspec"].status, "accepted", "the generic SunSpec path pairs whatever SunSpec device answers");
  });
});

test("configure over HTTPS: a PV inverter under the id of a Zigbee plug is a 400 naming both, and so is a device_id with / + # or a newline; nothing is paired", async () => {
  await withSiteGateway(
    tcpScenario(),
    () => ({
      zigbee: { url: "mqtt://127.0.0.1:1", devices: [{ device_id: "plug-1", friendly_name: "washer-plug", device_type: 30 }] },
    }),
    async (site, gw) => {
      const port = site.tcpPorts[0];
      const auth = { authorization: `Bearer ${await gw.token()}` };
      const r = await gw.configure([tcpDevice("plug-1", port, 2, "sunspec", { mb_device_type: 2 })], auth);
      assert.equal(r.status, 400, r.text);
      assert.equal(r.json.error, "invalid_request");
      assert.match(
        JSON.stringify(r.json),
        /devices\[0\] \(modbus\) and the config file's zigbee\.devices\[0\] \(zigbee\) both name it/,
        r.text,
      );
      for (const id of ["pv/1", "pv+1", "pv#1", "pv\n1", "pv\u00001"]) {
        const bad = await gw.configure([tcpDevice(id, port, 2, "sunspec")], auth);
        assert.equal(bad.status, 400, `${JSON.stringify(id)}: ${bad.text}`);
        assert.match(bad.text, /must be 1 to 64 characters of A-Z a-z 0-9/);
      }
      const sync = await gw.deviceSync();
      const ids = (sync.json.devices as Array<{ device_id: string; device_type: number }>).map((d) => [d.device_id, d.device_type]);
      assert.ok(!ids.some(([id]) => String(id).startsWith("pv")), sync.text);
      assert.ok(!ids.some(([id, type]) => id === "plug-1" && type === 11), `no PV inverter under plug-1: ${sync.text}`);
    },
  );
});
