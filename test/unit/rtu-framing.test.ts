// RTU port framing from the config to the wire settings (pure logic): the serial open
// options, the bus's character time and silences, the planner's gap, a reframed bus, and
// the simulator's line timing. The real pty is in test/integration/rtu-ports.test.ts.
import { test } from "node:test";
import assert from "node:assert/strict";
import { parseConfig } from "../../src/load-config.js";
import { endpointForDevice } from "../../src/modbus/device/pool.js";
import { DeviceDriver } from "../../src/modbus/device/driver.js";
import { Bus, BusManager } from "../../src/modbus/bus.js";
import { serialOpenOptions, type Endpoint } from "../../src/modbus/endpoint.js";
import { rtuGapRegs } from "../../src/modbus/planner.js";
import type { Transport } from "../../src/modbus/transport.js";
import type { DeviceConfig } from "../../src/modbus/config-schema.js";
import { builtinProfiles } from "../../src/profiles/registry.js";
import { silentLogger } from "../../src/log.js";
import { parseScenario } from "../../hw-sim/scenario.js";
import { RtuServer } from "../../hw-sim/rtu-server.js";
import { Endpoint as SimEndpoint } from "../../hw-sim/faults.js";
import { testConfigInput, TEST_ORG } from "../support/config.js";

const close = (a: number, b: number) => Math.abs(a - b) < 1e-9;

function rtuDev(port: number, baud: number): DeviceConfig {
  return {
    device_id: `d${port}`,
    device_type: "modbus",
    device_integration: `${TEST_ORG}/sdm630`,
    mb_type: 1,
    mb_device_type: 1,
    mb_slave_id: 10,
    mb_baud: baud,
    mb_rtu_no: port,
  };
}

class NullTransport implements Transport {
  isOpen = false;
  opens = 0;
  closes = 0;
  constructor(readonly endpoint: Endpoint) {}
  async open() {
    this.opens++;
    this.isOpen = true;
  }
  async close() {
    this.closes++;
    this.isOpen = false;
  }
  async read(_u: number, _t: string, _a: number, count: number) {
    return new Array(count).fill(0);
  }
  async writeRegisters() {}
  async writeCoils() {}
}

test("rtu_ports takes the object form with its framing; the plain string is 9600 8N1; relative paths resolve against the config's folder", () => {
  const cfg = parseConfig(
    testConfigInput("/tmp/x", {
      rtu_ports: {
        "1": { path: "./ttyE", baud: 9600, parity: "even", stop_bits: 1 },
        "2": "./ttyN",
        "3": { path: "/dev/ttyUSB0", baud: 19200 },
      },
    }),
    "/etc/sitegate",
  );
  assert.deepEqual(cfg.rtu_ports, {
    "1": { path: "/etc/sitegate/ttyE", baud: 9600, parity: "even", stop_bits: 1 },
    "2": { path: "/etc/sitegate/ttyN", baud: 9600, parity: "none", stop_bits: 1 },
    "3": { path: "/dev/ttyUSB0", baud: 19200, parity: "none", stop_bits: 1 },
  });
});

test("an 8E1 port opens the serial port with parity even and times the bus at 11 bits a character", async () => {
  const cfg = parseConfig(testConfigInput("/tmp/x", { rtu_ports: { "1": { path: "/dev/ttyE", parity: "even" }, "2": "/dev/ttyN" } }), "/");
  const e8e1 = endpointForDevice(rtuDev(1, 9600), cfg.rtu_ports);
  const e8n1 = endpointForDevice(rtuDev(2, 9600), cfg.rtu_ports);
  assert.ok(e8e1.kind === "rtu" && e8n1.kind === "rtu");
  assert.deepEqual(serialOpenOptions(e8e1), { baudRate: 9600, dataBits: 8, parity: "even", stopBits: 1 });
  assert.deepEqual(serialOpenOptions(e8n1), { baudRate: 9600, dataBits: 8, parity: "none", stopBits: 1 });

  const bus = new Bus(e8e1, silentLogger(), (e) => new NullTransport(e));
  assert.equal(bus.timing?.bitsPerChar, 11);
  assert.ok(close(bus.timing!.charMs, 11000 / 9600), `char time ${bus.timing!.charMs}`);
  assert.ok(close(bus.gapMs, (3.5 * 11000) / 9600), `3.5-char silence ${bus.gapMs}`);
  const plain = new Bus(e8n1, silentLogger(), (e) => new NullTransport(e));
  assert.ok(close(plain.gapMs, (3.5 * 10000) / 9600));
  await Promise.all([bus.close(), plain.close()]);
});

test("the planner's gap follows the port's framing (11 bits at 8E1, 8N2)", async () => {
  const cfg = parseConfig(
    testConfigInput("/tmp/x", {
      rtu_ports: { "1": { path: "/dev/ttyE", parity: "even" }, "2": { path: "/dev/ttyS2", stop_bits: 2 }, "3": "/dev/ttyN" },
    }),
    "/",
  );
  const sdm = builtinProfiles().get("sdm630");
  const gap = (port: number) => {
    const e = endpointForDevice(rtuDev(port, 38400), cfg.rtu_ports);
    return new DeviceDriver(new Bus(e, silentLogger(), (x) => new NullTransport(x)), 10, sdm, e).maxGap;
  };
  assert.equal(gap(1), rtuGapRegs(38400, 11));
  assert.equal(gap(2), rtuGapRegs(38400, 11));
  assert.equal(gap(3), rtuGapRegs(38400, 10));
  assert.notEqual(gap(1), gap(3), "at 38400 baud one more bit a character is worth one register less");
});

test("a bus reframed to another baud closes its port and reopens it with the new settings before the next request", async () => {
  const made: NullTransport[] = [];
  const e9600: Endpoint = { kind: "rtu", path: "/dev/ttyX", baud: 9600, parity: "none", stopBits: 1 };
  const bus = new Bus(e9600, silentLogger(), (e) => {
    const t = new NullTransport(e);
    made.push(t);
    return t;
  });
  await bus.read(1, "holding", 0, 1);
  assert.equal(made.length, 1);
  assert.equal(made[0].opens, 1);
  assert.equal(bus.reframe({ ...e9600 }), false, "the same settings change nothing");
  assert.equal(bus.reframe({ ...e9600, baud: 19200 }), true);
  assert.ok(close(bus.timing!.charMs, 10000 / 19200), "timing follows at once");
  await bus.read(1, "holding", 0, 1);
  assert.equal(made.length, 2);
  assert.equal(made[0].closes, 1, "the old port was closed");
  assert.equal(made[1].opens, 1);
  assert.deepEqual(made[1].endpoint, { ...e9600, baud: 19200 });
  assert.equal(bus.transport, made[1]);
  await bus.close();
});

test("the bus manager keeps one bus per serial path and reframes it when asked for other settings", async () => {
  const buses = new BusManager(silentLogger());
  const a = buses.get({ kind: "rtu", path: "/dev/ttyNOPE", baud: 9600, parity: "none", stopBits: 1 });
  const b = buses.get({ kind: "rtu", path: "/dev/ttyNOPE", baud: 19200, parity: "even", stopBits: 1 });
  assert.equal(a, b);
  assert.deepEqual(a.endpoint, { kind: "rtu", path: "/dev/ttyNOPE", baud: 19200, parity: "even", stopBits: 1 });
  await buses.closeAll();
});

test("the simulator's RTU port takes the same framing keys for its line timing", () => {
  const sc = parseScenario({
    ports: [
      { kind: "rtu", path: "a", peer: "b", baud: 9600, parity: "even", stop_bits: 1, devices: [{ unit: 1, model: "relay", name: "r1" }] },
      { kind: "rtu", path: "c", peer: "d", baud: 9600, devices: [{ unit: 1, model: "relay", name: "r2" }] },
    ],
  });
  const [even, plain] = sc.ports.map((p) => {
    assert.equal(p.kind, "rtu");
    return new RtuServer(new SimEndpoint(), p as Extract<typeof p, { kind: "rtu" }>);
  });
  assert.ok(close(even.charMs, 11000 / 9600));
  assert.ok(close(even.silenceMs, (3.5 * 11000) / 9600));
  assert.ok(close(plain.charMs, 10000 / 9600));
  assert.throws(
    () =>
      parseScenario({ ports: [{ kind: "rtu", path: "a", peer: "b", parity: "mark", devices: [{ unit: 1, model: "relay", name: "r" }] }] }),
    /ports\[0\]\.parity/,
  );
});
