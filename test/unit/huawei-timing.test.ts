// Issue 42 item 6: the Huawei profile's timing from the public huawei-solar library (wait
// after connect, answer timeout, gap between requests), and its running status 0
// ("offline" in the sources) as device_op_mode 4.
import { test } from "node:test";
import assert from "node:assert/strict";
import { builtinProfiles } from "../../src/profiles/registry.js";
import { Bus } from "../../src/modbus/bus.js";
import { DeviceDriver } from "../../src/modbus/device/driver.js";
import { opModeCode } from "../../src/model/roles.js";
import { silentLogger } from "../../src/log.js";
import type { Transport } from "../../src/modbus/transport.js";

const unused: Transport = {
  isOpen: false,
  open: async () => assert.fail("no request in this test"),
  close: async () => {},
  read: async () => assert.fail("no request in this test"),
  writeRegisters: async () => assert.fail("no request in this test"),
  writeCoils: async () => assert.fail("no request in this test"),
};

test("huawei-sun2000 waits 1 s after connecting, allows 10 s answers and keeps 50 ms between requests", () => {
  const p = builtinProfiles().get("huawei-sun2000");
  assert.equal(p.connect_delay_ms, 1000);
  assert.equal(p.timeout_ms, 10_000);
  assert.equal(p.delay_ms, 50);
  const others = builtinProfiles()
    .names()
    .filter((n) => n !== "huawei-sun2000");
  for (const n of others) assert.equal(builtinProfiles().get(n).connect_delay_ms, 0, `${n}: no source asks for a wait after connecting`);
});

test("huawei running status 0 (offline) is device_op_mode 4, not standby; the other states keep their meaning", async () => {
  const bus = new Bus({ kind: "tcp", host: "127.0.0.1", port: 1 }, silentLogger(), unused);
  const d = new DeviceDriver(bus, 1, builtinProfiles().get("huawei-sun2000"));
  assert.equal(d.opMode({ battery_status: 0 }), 4);
  assert.equal(d.opMode({ battery_status: 0 }), opModeCode("fault"));
  assert.equal(d.opMode({ battery_status: 1 }), opModeCode("standby"));
  assert.equal(d.opMode({ battery_status: 2 }), opModeCode("automatic"));
  assert.equal(d.opMode({ battery_status: 3 }), opModeCode("fault"));
  assert.equal(d.opMode({ battery_status: 4 }), opModeCode("standby"), "sleep mode");
  await bus.close();
});
