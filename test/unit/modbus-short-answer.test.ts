// Modbus answers shorter than what was asked (a device that sends fewer words, a caller that
// hands a single-register write more or fewer values), and a profile made in code with
// nothing to read: a specific error, never a value that was not sent read as one. Pure logic
// over a fake bus; no socket is opened.
import { test } from "node:test";
import assert from "node:assert/strict";
import { isSitegateError } from "../../src/errors.js";
import type { Bus } from "../../src/modbus/bus.js";
import { DeviceDriver } from "../../src/modbus/device/driver.js";
import { ModbusSerialTransport } from "../../src/modbus/transport.js";
import { builtinProfiles } from "../../src/profiles/registry.js";

const SUNS = [0x5375, 0x6e53];

/** A bus whose device has the SunSpec marker at every base and answers `header` for anything else. */
function sunSpecBus(header: number[]): Bus {
  return {
    endpoint: { kind: "tcp", host: "127.0.0.1", port: 1 },
    setDeviceDelay() {},
    read: async (_unit: number, _table: string, _address: number, count: number) => (count === 2 && _address % 10000 === 0 ? SUNS : header),
  } as unknown as Bus;
}

test("a SunSpec model header answered with one word of two is refused as MODBUS_BAD_RESPONSE", async () => {
  const driver = new DeviceDriver(sunSpecBus([1]), 1, builtinProfiles().get("sunspec"));
  await assert.rejects(
    driver.pair(),
    (e: unknown) =>
      isSitegateError(e, "MODBUS_BAD_RESPONSE") &&
      /model header/.test((e as Error).message) &&
      /word 2 is missing/.test((e as Error).message),
  );
  assert.equal(driver.paired, false);
});

test("a function 6 write of two values or none is refused before anything is sent", async () => {
  const t = new ModbusSerialTransport({ kind: "tcp", host: "127.0.0.1", port: 1 });
  for (const values of [[1, 2], []]) {
    await assert.rejects(
      t.writeRegisters(1, 100, values, 500, 6),
      (e: unknown) =>
        isSitegateError(e, "CONTROL_VALUE_INVALID") && new RegExp(`${values.length} values were given`).test((e as Error).message),
    );
  }
});

test("a fixed profile made in code with neither identity registers nor points is refused as PROFILE_INVALID", async () => {
  const sdm = builtinProfiles().get("sdm630");
  assert.equal(sdm.kind, "fixed");
  const bare = { ...sdm, identity: [], points: [] } as typeof sdm;
  const driver = new DeviceDriver(sunSpecBus([]), 1, bare);
  await assert.rejects(
    driver.pair(),
    (e: unknown) => isSitegateError(e, "PROFILE_INVALID") && /neither identity registers nor points/.test((e as Error).message),
  );
});
