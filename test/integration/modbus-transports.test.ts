// The three transports against the simulator, and how their failures surface: typed
// errors with stable codes, and a connection that comes back by itself.
import { test } from "node:test";
import assert from "node:assert/strict";
import { withSite, type ScenarioInput } from "../support/site.js";
import { Bus } from "../../src/modbus/bus.js";
import { DeviceDriver } from "../../src/modbus/device/driver.js";
import { builtinProfiles } from "../../src/profiles/registry.js";
import { silentLogger } from "../../src/log.js";
import type { SitegateError } from "../../src/errors.js";

const scenario: ScenarioInput = {
  seed: 2,
  control: { listen: "127.0.0.1:0" },
  site: { pv_irradiance: 0.5 },
  ports: [
    { kind: "tcp", listen: "127.0.0.1:0", devices: [{ unit: 1, model: "sunspec-storage", name: "bat" }] },
    { kind: "rtu-tcp", listen: "127.0.0.1:0", devices: [{ unit: 5, model: "sunspec-meter", name: "meter" }] },
    { kind: "rtu", path: "sim", peer: "gw", baud: 19200, devices: [{ unit: 7, model: "sunspec-pv", name: "pv" }] },
  ],
};

const codeOf = (e: unknown) => (e as SitegateError).code;

test("TCP, RTU over TCP and RTU serial read the same way through one interface", async () => {
  await withSite(scenario, async (site) => {
    const buses = [
      { bus: new Bus({ kind: "tcp", host: "127.0.0.1", port: site.tcpPorts[0] }, silentLogger()), unit: 1, type: 10 },
      { bus: new Bus({ kind: "rtu-tcp", host: "127.0.0.1", port: site.tcpPorts[1] }, silentLogger()), unit: 5, type: 12 },
      {
        bus: new Bus({ kind: "rtu", path: site.rtuPeers[0], baud: 19200, parity: "none", stopBits: 1 }, silentLogger()),
        unit: 7,
        type: 11,
      },
    ];
    try {
      for (const { bus, unit, type } of buses) {
        const d = new DeviceDriver(bus, unit, builtinProfiles().get("sunspec"));
        assert.equal((await d.pair()).device_type, type, bus.key);
        assert.equal(typeof (await d.read(["fast"])).power_w, "number", bus.key);
      }
    } finally {
      await Promise.all(buses.map((b) => b.bus.close()));
    }
  });
});

test("failures are typed: exception with its code, timeout, bad CRC; a dropped connection comes back", async () => {
  await withSite(scenario, async (site) => {
    const tcp = new Bus({ kind: "tcp", host: "127.0.0.1", port: site.tcpPorts[0] }, silentLogger());
    const rtuTcp = new Bus({ kind: "rtu-tcp", host: "127.0.0.1", port: site.tcpPorts[1] }, silentLogger());
    try {
      const e2 = await tcp.read(1, "holding", 30000, 2).catch((e) => e);
      assert.equal(codeOf(e2), "MODBUS_EXCEPTION");
      assert.equal((e2 as SitegateError).details[0].message, "2");
      assert.equal((e2 as SitegateError).transient, false, "an illegal address is permanent");
      site.setFault({ device: "bat", fault: "exception", code: 6 });
      const busy = await tcp.read(1, "holding", 40000, 2).catch((e) => e);
      assert.equal(codeOf(busy), "MODBUS_EXCEPTION");
      assert.equal((busy as SitegateError).transient, true, "busy is worth retrying");
      site.setFault({ device: "bat", fault: "no_answer" });
      assert.equal(codeOf(await tcp.read(1, "holding", 40000, 2, { timeoutMs: 200 }).catch((e) => e)), "MODBUS_TIMEOUT");
      site.clearFaults();
      site.setFault({ device: "meter", fault: "crc" });
      assert.equal(codeOf(await rtuTcp.read(5, "holding", 40000, 2, { timeoutMs: 300, retries: 0 }).catch((e) => e)), "MODBUS_CRC");
      site.clearFaults();
      site.setFault({ device: "bat", fault: "drop" });
      const dropped = await tcp.read(1, "holding", 40000, 2, { timeoutMs: 300 }).catch((e) => e);
      assert.ok(["MODBUS_DISCONNECTED", "MODBUS_TIMEOUT"].includes(codeOf(dropped)), codeOf(dropped));
      site.clearFaults();
      assert.deepEqual(await tcp.read(1, "holding", 40000, 2), [0x5375, 0x6e53], "reconnected without a restart");
      assert.ok(tcp.stats.reconnects >= 2);
    } finally {
      await tcp.close();
      await rtuTcp.close();
    }
  });
});

test("RTU: an answer that comes after its request timed out is never taken for the next request's answer", async () => {
  // One relay on a 9600-baud line with real line timing. Its first answer is held back past
  // the request's timeout; then its coils change. The next read of the same unit, function
  // and length must see the new coils: RTU frames carry no transaction id, so only the bus
  // throwing the late frame away keeps it from passing for the next answer.
  const rtu: ScenarioInput = {
    seed: 3,
    control: { listen: "127.0.0.1:0" },
    site: {},
    ports: [
      {
        kind: "rtu",
        path: "sim",
        peer: "gw",
        baud: 9600,
        line_timing: true,
        turnaround_ms: 5,
        devices: [{ unit: 11, model: "relay", name: "relay", coils: 4, load_per_coil_w: 500 }],
      },
    ],
  };
  await withSite(rtu, async (site) => {
    const bus = new Bus({ kind: "rtu", path: site.rtuPeers[0], baud: 9600, parity: "none", stopBits: 1 }, silentLogger());
    try {
      site.device("relay").set({ coils: [true, false, true, false] });
      assert.deepEqual(await bus.read(11, "coil", 0, 4, { timeoutMs: 1000 }), [1, 0, 1, 0]);
      site.setFault({ device: "relay", fault: "delay", delay_ms: 250 });
      const late = await bus.read(11, "coil", 0, 4, { timeoutMs: 200, retries: 0 }).catch((e) => e);
      assert.equal(codeOf(late), "MODBUS_TIMEOUT");
      site.clearFaults();
      site.device("relay").set({ coils: [false, true, false, true] });
      assert.deepEqual(await bus.read(11, "coil", 0, 4, { timeoutMs: 1000 }), [0, 1, 0, 1], "the new coils, not the late answer's");
      assert.deepEqual(await bus.read(11, "coil", 0, 4, { timeoutMs: 1000 }), [0, 1, 0, 1], "and the line stays in step");
    } finally {
      await bus.close();
    }
  });
});
