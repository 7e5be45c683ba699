// The config file's devices against a connector that leaves entries unanswered (pure logic:
// a fake connector and registry, the retry timer driven by mock timers).
import { test } from "node:test";
import assert from "node:assert/strict";
import { ConfigDevices } from "../../src/modbus/device/config-devices.js";
import type { DeviceConfig } from "../../src/modbus/config-schema.js";
import type { DeviceRegistry } from "../../src/modbus/device/registry.js";
import type { ConfigureResult, DeviceConnector } from "../../src/devices/types.js";
import { silentLogger } from "../../src/log.js";
import { TEST_ORG } from "../support/config.js";

function tcpDev(id: string, port: number): DeviceConfig {
  return {
    device_id: id,
    device_type: "modbus",
    device_integration: `${TEST_ORG}/sdm630`,
    mb_type: 2,
    mb_device_type: 1,
    mb_slave_id: 1,
    mb_ip: "127.0.0.1",
    mb_port: port,
  } as DeviceConfig;
}

test("an entry the connector left unanswered is tried again, not dropped", async (t) => {
  t.mock.timers.enable({ apis: ["setTimeout"] });
  const asked: string[][] = [];
  const connector: Pick<DeviceConnector<DeviceConfig>, "configure"> = {
    async configure(devices) {
      asked.push(devices.map((d) => d.device_id));
      // The first answer covers only the first entry.
      const answered = asked.length === 1 ? devices.slice(0, 1) : devices;
      return answered.map((d): ConfigureResult => ({ device_id: d.device_id, status: "accepted", message: "paired" }));
    },
  };
  const applied: string[] = [];
  const registry = {
    appliedConfigHash: () => undefined,
    get: () => undefined,
    markConfigApplied: (id: string) => void applied.push(id),
  } as unknown as DeviceRegistry;
  const cd = new ConfigDevices([tcpDev("a", 1502), tcpDev("b", 1503)], { connector, registry, log: silentLogger() });
  cd.start();
  await cd.settled;
  assert.deepEqual(applied, ["a"]);
  t.mock.timers.tick(5000); // the first retry's delay
  await cd.stop(); // waits for the retry's applying
  assert.deepEqual(asked, [["a", "b"], ["b"]]);
  assert.deepEqual(applied, ["a", "b"]);
});
