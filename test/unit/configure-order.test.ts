// The pairing pipeline's scheduling and steps (pure logic, a fake pool and fake drivers):
// devices on different buses are paired in parallel, devices on one bus one after
// another, results in request order; each entry goes down the steps once, in order.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Pairing } from "../../src/modbus/device/pairing.js";
import { SitegateError } from "../../src/errors.js";
import { silentLogger } from "../../src/log.js";
import type { CheckWrite, DeviceConfig } from "../../src/modbus/config-schema.js";
import type { DeviceDescriptor } from "../../src/devices/types.js";
import type { DeviceDriver } from "../../src/modbus/device/driver.js";
import type { PairingDeps } from "../../src/modbus/device/pairing.js";

const dev = (id: string, port: number, extra: Partial<DeviceConfig> = {}): DeviceConfig =>
  ({
    device_id: id,
    device_type: "modbus",
    device_integration: "org/sunspec",
    mb_type: 2,
    mb_device_type: 99,
    mb_ip: "127.0.0.1",
    mb_port: port,
    mb_slave_id: 1,
    ...extra,
  }) as DeviceConfig;

/** A pool whose drivers answer as `answers` says, recording every step it is asked for. */
function rig(answers: { fail?: string[]; badWrite?: string[] } = {}) {
  const steps: string[] = [];
  const stored: Array<{ id: string; full: boolean; role: string }> = [];
  const driver = (c: DeviceConfig) =>
    ({
      profile: { name: "sunspec" },
      async pair(): Promise<DeviceDescriptor> {
        steps.push(`start ${c.device_id}`);
        await new Promise((r) => setImmediate(r)); // a bus round trip: other buses may run meanwhile
        steps.push(`end ${c.device_id}`);
        if (answers.fail?.includes(c.device_id)) throw new SitegateError("MODBUS_TIMEOUT", "no answer");
        return { role: "unknown", device_type: 0, capabilities: ["telemetry"], profile: "sunspec", identity: { serial: "42" } };
      },
      async checkWrite(w: CheckWrite) {
        steps.push(`write ${c.device_id}`);
        if (answers.badWrite?.includes(c.device_id))
          throw new SitegateError("REGISTRY_WRITE_FAILED", `check write ${w.reg_cmd_id} did not stick: read back 0`);
      },
    }) as unknown as DeviceDriver;
  const deps: PairingDeps = {
    pool: {
      rtuPorts: {},
      endpointFor: (c) => (steps.push(`endpoint ${c.device_id}`), { kind: "tcp", host: "127.0.0.1", port: c.mb_port! }),
      candidate: (c) => (steps.push(`bus ${c.device_id}`), driver(c)),
      adopt: (c) => void steps.push(`adopt ${c.device_id}`),
      reject: (c) => void steps.push(`reject ${c.device_id}`),
    },
    registry: { list: () => [], put: (c, d, full) => (stored.push({ id: c.device_id, full, role: d!.role }), undefined as never) },
    log: silentLogger(),
  };
  return { pairing: new Pairing(deps), steps, stored };
}

test("one bus at a time per bus, buses in parallel, results in request order", async () => {
  const { pairing, steps, stored } = rig({ fail: ["a2"] });
  const results = await pairing.configure([dev("a1", 1), dev("b1", 2), dev("a2", 1), dev("b2", 2)]);
  assert.deepEqual(
    results.map((r) => `${r.device_id}:${r.code ?? r.status}`),
    ["a1:accepted", "b1:accepted", "a2:PAIRING_FAILED", "b2:accepted"],
  );
  assert.match(results[2].message, /^device did not respond as sunspec: no answer/);
  // Bus 1 (a*) is serial: a1 ends before a2 starts. Bus 2 runs alongside bus 1.
  assert.ok(steps.indexOf("end a1") < steps.indexOf("start a2"));
  assert.ok(steps.indexOf("end b1") < steps.indexOf("start b2"));
  assert.ok(steps.indexOf("start b1") < steps.indexOf("end a1"), "the buses overlap");
  assert.deepEqual(stored.map((s) => s.id).sort(), ["a1", "b1", "b2"], "a device that fails pairing is not stored");
  assert.ok(
    steps.includes("reject a2") && !steps.includes("adopt a2"),
    "a device that does not answer is rejected, its configuration in force stays",
  );
});

test("each entry goes down the pipeline once: endpoint, bus, identify, check writes, adopt", async () => {
  const writes: CheckWrite[] = [
    { reg_cmd_id: 1, reg_fun: 6, reg_reg: 40100, reg_value: 5 },
    { reg_cmd_id: 2, reg_fun: 6, reg_reg: 40101, reg_value: 6 },
  ];
  const { pairing, steps, stored } = rig({ badWrite: ["bad"] });
  const [ok] = await pairing.configure([dev("ok", 1, { mb_device_type: 3, mb_check_write: writes })]);
  assert.deepEqual(steps, ["endpoint ok", "bus ok", "start ok", "end ok", "write ok", "write ok", "adopt ok"]);
  assert.equal(ok.status, "accepted");
  assert.match(
    ok.message,
    /^paired with 42 \(profile sunspec, device_type 10\); 2 check write\(s\) verified; device_type 10 from mb_device_type 3 \(storage inverter\)/,
  );
  assert.deepEqual(stored, [{ id: "ok", full: true, role: "battery" }], "mb_device_type decides the role the device does not tell");
  steps.length = 0;
  const [bad] = await pairing.configure([dev("bad", 1, { mb_check_write: writes })]);
  assert.deepEqual(
    steps,
    ["endpoint bad", "bus bad", "start bad", "end bad", "write bad", "adopt bad"],
    "the first failed write ends the writes",
  );
  assert.equal(bad.code, "REGISTRY_WRITE_FAILED");
  assert.match(bad.message, /check write 1 did not stick: read back 0; the configuration is stored but the device is not fully configured/);
  assert.deepEqual(stored[1], { id: "bad", full: false, role: "unknown" });
});
