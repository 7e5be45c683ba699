// "Not available" where the brand's device gives it, by the simulator's brand models, and
// the gateway's profile reading those models in-process: a NaN is no reading, never a
// number. Huawei without a power meter: meter status 0 (offline) and the meter's I32
// values 0x7FFFFFFF (huawei-solar-lib's invalid value of an I32).
import { test } from "node:test";
import assert from "node:assert/strict";
import { SiteModel } from "../../hw-sim/site-model.js";
import { deviceSchema, type BrandSpec } from "../../hw-sim/scenario.js";
import { buildBrandDevices } from "../../hw-sim/models/brands/index.js";
import { handlePdu } from "../../hw-sim/modbus-pdu.js";
import type { SimDevice } from "../../hw-sim/models/device.js";
import { builtinProfiles } from "../../src/profiles/registry.js";
import { Bus } from "../../src/modbus/bus.js";
import { DeviceDriver } from "../../src/modbus/device/driver.js";
import { silentLogger } from "../../src/log.js";
import { transportTo } from "../support/in-process.js";

function huawei(extra: Record<string, unknown>) {
  const now = Date.UTC(2026, 5, 1, 12, 0);
  const site = new SiteModel(
    { base_load_w: 2000, load_noise_pct: 0, pv_irradiance: 0, tz_offset_h: 0, voltage_v: 230, frequency_hz: 50 },
    7,
    () => now,
  );
  const spec = deviceSchema.parse({
    unit: 2,
    name: "huawei",
    model: "huawei-sun2000",
    capacity_wh: 10000,
    self_use_load_pct: 0,
    ...extra,
  }) as BrandSpec;
  return buildBrandDevices(spec, site)[0]!;
}

function read(dev: SimDevice, address: number, count: number): number[] {
  const r = handlePdu(dev, Buffer.from([3, address >> 8, address & 0xff, 0, count]), () => {});
  assert.equal(r[0], 3, `read ${address}`);
  return Array.from({ length: count }, (_, i) => r.readUInt16BE(2 + 2 * i));
}

test("huawei-sun2000 without a power meter: 37100 offline, 37113/37119/37121 read the I32 NaN; with one, the grid", () => {
  const none = huawei({ meter: false });
  assert.deepEqual(read(none, 37100, 1), [0]);
  for (const a of [37113, 37119, 37121]) assert.deepEqual(read(none, a, 2), [0x7fff, 0xffff], `${a}`);
  const metered = huawei({});
  assert.deepEqual(read(metered, 37100, 1), [1]);
  assert.deepEqual(read(metered, 37113, 2), [0xffff, 0xffff - 2000 + 1], "importing 2 kW: -2000, feeding positive");
});

test("the gateway reads a meterless Huawei's grid as no reading (not 2,147,483,647 W), its battery as usual", async () => {
  for (const meter of [false, true]) {
    const dev = huawei({ meter });
    const bus = new Bus({ kind: "tcp", host: "sim", port: 502 }, silentLogger(), transportTo(dev));
    try {
      const d = new DeviceDriver(bus, 2, builtinProfiles().get("huawei-sun2000"));
      await d.pair();
      const m = await d.read(["fast", "slow"]);
      assert.equal(typeof m.power_w, "number");
      assert.equal(typeof m.soc_pct, "number");
      if (meter) {
        assert.equal(m.grid_power_w, 2000);
        assert.equal(typeof m.energy_import_wh, "number");
      } else {
        assert.equal(m.grid_power_w, undefined, JSON.stringify(m));
        assert.equal(m.energy_import_wh, undefined);
        assert.equal(m.energy_export_wh, undefined);
      }
    } finally {
      await bus.close();
    }
  }
});
