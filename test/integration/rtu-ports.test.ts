// RTU port framing and baud against the real simulator on a socat pty pair, through the
// real daemon. A pty carries no parity (Linux clears PARENB on it), so the framing is
// checked where the gateway sets it: the serial open options, the pty's own settings
// (speed, stop bits, read with stty), and the bus's timing.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { demoScenario, type ScenarioInput } from "../support/site.js";
import { rtuDevice, withSiteGateway, type Gateway } from "../support/gateway.js";
import type { ModbusEngine } from "../../src/modbus/part.js";
import type { ModbusSerialTransport } from "../../src/modbus/transport.js";
import type { DeviceRegistry } from "../../src/modbus/device/registry.js";
import type { Bus } from "../../src/modbus/bus.js";

/** The demo site's RTU port alone, with this framing. */
function rtuScenario(baud: number, parity: "none" | "even" | "odd" = "none"): ScenarioInput {
  const s = demoScenario({ baud });
  const rtu = s.ports.find((p) => p.kind === "rtu")!;
  return { ...s, ports: [{ ...rtu, parity } as typeof rtu] };
}

function rtuBus(gw: Gateway, path: string): Bus {
  const bus = gw.daemon.part<ModbusEngine>("modbus").buses.find(`rtu:${path}`);
  assert.ok(bus, `no bus for ${path}`);
  return bus;
}

const openedWith = (bus: Bus) => (bus.transport as ModbusSerialTransport).openedWith;

/** The line settings the pty holds, as the kernel reports them. */
function stty(path: string): { speed: number; cstopb: boolean } {
  const out = execFileSync("stty", ["-F", path, "-a"], { encoding: "utf8" });
  const speed = /speed (\d+) baud/.exec(out);
  assert.ok(speed, out);
  return { speed: Number(speed[1]), cstopb: /(^|\s)cstopb(\s|$)/.test(out) };
}

async function configure(gw: Gateway, devices: unknown[]) {
  const r = await gw.configure(devices);
  assert.equal(r.status, 200, r.text);
  return r.json.devices as Array<{ device_id: string; status: string; code?: string; message: string }>;
}

test("an 8E1 port is opened with parity even and its bus timed at 11 bits a character (real pty)", async () => {
  await withSiteGateway(
    rtuScenario(19200, "even"),
    (site) => ({ rtu_ports: { "1": { path: site.rtuPeers[0], baud: 19200, parity: "even", stop_bits: 1 } } }),
    async (site, gw) => {
      const r = await configure(gw, [rtuDevice("sdm-1", 10, "sdm630", { mb_baud: 19200, mb_device_type: 1 })]);
      assert.equal(r[0].status, "accepted", r[0].message);
      const bus = rtuBus(gw, site.rtuPeers[0]);
      assert.deepEqual(openedWith(bus), { baudRate: 19200, dataBits: 8, parity: "even", stopBits: 1 });
      assert.deepEqual(stty(site.rtuPeers[0]), { speed: 19200, cstopb: false });
      assert.equal(bus.timing?.bitsPerChar, 11);
      assert.ok(Math.abs(bus.timing!.charMs - 11000 / 19200) < 1e-9);
      assert.ok(Math.abs(bus.gapMs - (3.5 * 11000) / 19200) < 1e-9);
    },
  );
});

test("a device asking for another baud than the port's other devices use gets an error entry naming both, and nothing changes", async () => {
  await withSiteGateway(
    rtuScenario(9600),
    (site) => ({ rtu_ports: { "1": site.rtuPeers[0] } }),
    async (site, gw) => {
      const first = await configure(gw, [rtuDevice("sdm-1", 10, "sdm630"), rtuDevice("relay-1", 11, "relay-coils")]);
      assert.deepEqual(
        first.map((d) => d.status),
        ["accepted", "accepted"],
        JSON.stringify(first),
      );
      const bus = rtuBus(gw, site.rtuPeers[0]);
      const transport = bus.transport;
      const r = await configure(gw, [rtuDevice("relay-1", 11, "relay-coils", { mb_baud: 19200 })]);
      assert.equal(r[0].status, "error");
      assert.equal(r[0].code, "PAIRING_FAILED");
      assert.match(r[0].message, /mb_baud 19200 differs from the 9600 baud of RTU port 1/);
      assert.match(r[0].message, /sdm-1/);
      assert.equal(bus.transport, transport, "the port was not reopened");
      assert.equal(openedWith(bus)?.baudRate, 9600);
      assert.equal(stty(site.rtuPeers[0]).speed, 9600);
      assert.equal(gw.daemon.part<DeviceRegistry>("registry").get("relay-1")?.config.mb_baud, 9600, "the previous configuration stays");
    },
  );
});

test("when the port's only device asks for a new baud, the port is reopened at it", async () => {
  await withSiteGateway(
    rtuScenario(9600),
    (site) => ({ rtu_ports: { "1": site.rtuPeers[0] } }),
    async (site, gw) => {
      assert.equal((await configure(gw, [rtuDevice("sdm-1", 10, "sdm630")]))[0].status, "accepted");
      const bus = rtuBus(gw, site.rtuPeers[0]);
      assert.equal(openedWith(bus)?.baudRate, 9600);
      assert.equal(stty(site.rtuPeers[0]).speed, 9600);
      const before = bus.transport;
      const opens = bus.stats.reconnects;
      const r = await configure(gw, [rtuDevice("sdm-1", 10, "sdm630", { mb_baud: 19200 })]);
      assert.equal(r[0].status, "accepted", r[0].message);
      assert.notEqual(bus.transport, before, "a new port handle");
      assert.ok(bus.stats.reconnects > opens, "the port was opened again");
      assert.deepEqual(openedWith(bus), { baudRate: 19200, dataBits: 8, parity: "none", stopBits: 1 });
      assert.equal(stty(site.rtuPeers[0]).speed, 19200);
      assert.ok(Math.abs(bus.timing!.charMs - 10000 / 19200) < 1e-9);
      assert.equal(gw.daemon.part<DeviceRegistry>("registry").get("sdm-1")?.config.mb_baud, 19200);
    },
  );
});
