// Deye coverage: the profile pairs with every three-phase device type the public definitions
// list (5, 6, 0x0500, 0x0600-0x0601) and reads the rated power at 20-21 (0.1 W, low word
// first) as the device's max power. Pure logic: the profile's driver talks to the
// simulator's Deye model through its PDU handler; no socket is opened.
import { test } from "node:test";
import assert from "node:assert/strict";
import { SiteModel } from "../../hw-sim/site-model.js";
import { deviceSchema, type BrandSpec } from "../../hw-sim/scenario.js";
import { buildBrandDevices } from "../../hw-sim/models/brands/index.js";
import { handlePdu } from "../../hw-sim/modbus-pdu.js";
import type { SimDevice } from "../../hw-sim/models/device.js";
import type { Bus } from "../../src/modbus/bus.js";
import { DeviceDriver } from "../../src/modbus/device/driver.js";
import { mapModbusError } from "../../src/modbus/transport.js";
import { builtinProfiles } from "../../src/profiles/registry.js";
import { isSitegateError } from "../../src/errors.js";

/** The model as the simulator builds it from a scenario entry. */
function deye(extra: Record<string, unknown>): SimDevice {
  const site = new SiteModel(
    { base_load_w: 2000, load_noise_pct: 0, pv_irradiance: 0, tz_offset_h: 0, voltage_v: 230, frequency_hz: 50 },
    7,
    () => Date.UTC(2026, 5, 1, 2, 30),
  );
  const spec = deviceSchema.parse({ unit: 1, name: "deye", model: "deye-hybrid", capacity_wh: 10240, ...extra }) as BrandSpec;
  return buildBrandDevices(spec, site)[0]!;
}

/** A bus whose reads are answered by the model's PDU handler (function 3/4; an exception is thrown as the transport maps it). */
function busOf(dev: SimDevice): Bus {
  return {
    endpoint: { kind: "tcp", host: "127.0.0.1", port: 1 },
    setDeviceDelay() {},
    read: async (_unit: number, table: string, address: number, count: number) => {
      const pdu = Buffer.alloc(5);
      pdu[0] = table === "input" ? 4 : 3;
      pdu.writeUInt16BE(address, 1);
      pdu.writeUInt16BE(count, 3);
      const r = handlePdu(dev, pdu, () => {});
      if (r[0]! & 0x80) throw mapModbusError({ modbusCode: r[1], message: `exception ${r[1]}` }, `read ${table} ${address}`);
      return Array.from({ length: count }, (_, i) => r.readUInt16BE(2 + i * 2));
    },
  } as unknown as Bus;
}

const profile = () => builtinProfiles().get("deye-hybrid");

for (const device_type of [5, 6, 0x0500, 0x0600, 0x0601]) {
  test(`deye-hybrid pairs a three-phase hybrid of device type 0x${device_type.toString(16).padStart(4, "0")}`, async () => {
    const d = await new DeviceDriver(busOf(deye({ variant: "three-phase", device_type })), 1, profile()).pair();
    assert.equal(d.identity.device_type, String(device_type));
  });
}

test("deye-hybrid: max power is the rated power at 20-21 (0.1 W, low word first)", async () => {
  for (const rated_power_w of [8000, 12000]) {
    const d = await new DeviceDriver(busOf(deye({ variant: "three-phase", rated_power_w })), 1, profile()).pair();
    assert.equal(d.max_power_w, rated_power_w);
  }
});

test("deye-hybrid refuses the single-phase map (device type 3) by its identity", async () => {
  await assert.rejects(new DeviceDriver(busOf(deye({ variant: "single-phase" })), 1, profile()).pair(), (e) => isSitegateError(e));
});
