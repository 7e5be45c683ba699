// SMA's "not available" values (issue 42 item 5): the built-in profile reads the simulator's
// SMA model (hw-sim/models/brands/sma-storage.ts, written apart from the profile from SMA's
// register list) in-process. A NaN is no reading: never 0 W, never a state code.
import { test } from "node:test";
import assert from "node:assert/strict";
import { SiteModel } from "../../hw-sim/site-model.js";
import { deviceSchema, type BrandSpec } from "../../hw-sim/scenario.js";
import { buildBrandDevices } from "../../hw-sim/models/brands/index.js";
import { SMA_ENUM_NAN, type SmaStorage } from "../../hw-sim/models/brands/sma-storage.js";
import { handlePdu } from "../../hw-sim/modbus-pdu.js";
import { builtinProfiles } from "../../src/profiles/registry.js";
import { Bus } from "../../src/modbus/bus.js";
import { DeviceDriver } from "../../src/modbus/device/driver.js";
import { silentLogger } from "../../src/log.js";
import type { Transport } from "../../src/modbus/transport.js";
import type { Table } from "../../src/modbus/planner.js";

/** One simulated device on unit 3 over its own PDU handler: reads only (this test writes nothing). */
function transportTo(dev: SmaStorage): Transport {
  const call = (pdu: Buffer) => {
    const r = handlePdu(dev, pdu, () => {});
    if (r[0]! & 0x80) throw Object.assign(new Error(`Modbus exception ${r[1]}`), { modbusCode: r[1] });
    return r;
  };
  return {
    isOpen: true,
    open: async () => {},
    close: async () => {},
    read: async (_unit: number, table: Table, address: number, count: number) => {
      const pdu = Buffer.alloc(5);
      pdu[0] = table === "input" ? 4 : 3;
      pdu.writeUInt16BE(address, 1);
      pdu.writeUInt16BE(count, 3);
      const r = call(pdu);
      return Array.from({ length: count }, (_, i) => r.readUInt16BE(2 + 2 * i));
    },
    writeRegisters: async () => assert.fail("this test writes nothing"),
    writeCoils: async () => assert.fail("this test writes nothing"),
  };
}

function smaRig(extra: Record<string, unknown> = {}) {
  const now = Date.UTC(2026, 5, 1, 12, 0);
  const site = new SiteModel(
    { base_load_w: 8000, load_noise_pct: 0, pv_irradiance: 0, tz_offset_h: 0, voltage_v: 230, frequency_hz: 50 },
    7,
    () => now,
  );
  const spec = deviceSchema.parse({ unit: 3, name: "sma", model: "sma-storage", capacity_wh: 9800, ...extra }) as BrandSpec;
  const dev = buildBrandDevices(spec, site)[0] as SmaStorage;
  const bus = new Bus({ kind: "tcp", host: "sim", port: 502 }, silentLogger(), transportTo(dev));
  const driver = new DeviceDriver(bus, 3, builtinProfiles().get("sma-storage"));
  return { dev, driver };
}

test("sma-storage: with its meter, grid power is import minus feed-in", async () => {
  const { driver } = smaRig();
  const m = await driver.read(["fast", "slow"]);
  assert.equal(m.grid_power_w, 3000, "8 kW of load less the battery's 5 kW, drawn from the grid");
  assert.equal(m.condition, 307);
});

test("sma-storage: without a meter, 30865/30867 read S32 NaN: no grid reading, not 0 W; counters NaN too", async () => {
  const { driver } = smaRig({ meter: false });
  const m = await driver.read(["fast", "slow"]);
  assert.equal("grid_power_w" in m, false, `grid_power_w is no reading, got ${m.grid_power_w}`);
  assert.equal("energy_import_wh" in m, false, `energy_import_wh is no reading, got ${m.energy_import_wh}`);
  assert.equal("energy_export_wh" in m, false);
  assert.equal(typeof m.power_w, "number", "the device's other points read on");
  assert.equal(typeof m.soc_pct, "number");
});

test("sma-storage: condition 0xFFFFFD (ENUM NaN) is no state, not 16777213", async () => {
  const { dev, driver } = smaRig();
  dev.condition = SMA_ENUM_NAN;
  const m = await driver.read(["fast"]);
  assert.equal("condition" in m, false, `condition is no reading, got ${m.condition}`);
  assert.equal(typeof m.power_w, "number");
});
