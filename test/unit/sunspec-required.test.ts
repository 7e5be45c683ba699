// A SunSpec device's required points are checked at pairing like a register profile's: a
// point the role needs (a battery's soc_pct) that every model giving it reads as "not
// implemented" refuses the pairing by name; where one model leaves it unimplemented and
// another gives it (model 124's ChaState and model 802's SoC), the one that reads a value
// is polled. Pure logic over a fake bus holding a SunSpec register image; no socket.
import { test } from "node:test";
import assert from "node:assert/strict";
import { isSitegateError } from "../../src/errors.js";
import type { Bus } from "../../src/modbus/bus.js";
import { DeviceDriver } from "../../src/modbus/device/driver.js";
import { mapModbusError } from "../../src/modbus/transport.js";
import { builtinProfiles } from "../../src/profiles/registry.js";

const NI = 0xffff;

/** A SunSpec chain at 40000: common model 1, inverter 103 (W 1200), storage 124 (ChaState given), optionally battery 802 (SoC 55). */
function image(chaState: number, with802: boolean): Map<number, number> {
  const regs = new Map<number, number>();
  const put = (a: number, words: number[]) => words.forEach((w, i) => regs.set(a + i, w));
  put(40000, [0x5375, 0x6e53]);
  let at = 40002;
  const model = (id: number, len: number, set: Record<number, number>) => {
    put(at, [id, len, ...new Array<number>(len).fill(0)]);
    for (const [off, w] of Object.entries(set)) regs.set(at + Number(off), w);
    at += len + 2;
  };
  model(1, 66, {});
  model(103, 50, { 14: 1200, 15: 0 });
  model(124, 24, { 8: chaState, 22: 0 });
  if (with802) model(802, 62, { 11: 55, 56: 0 });
  put(at, [0xffff, 0]);
  return regs;
}

function bus(regs: Map<number, number>): Bus {
  return {
    endpoint: { kind: "tcp", host: "127.0.0.1", port: 1 },
    setDeviceDelay() {},
    read: async (_unit: number, table: string, address: number, count: number) => {
      const out: number[] = [];
      for (let a = address; a < address + count; a++) {
        const w = table === "holding" ? regs.get(a) : undefined;
        if (w === undefined) throw mapModbusError({ modbusCode: 2, message: "Illegal data address" }, `read ${table} ${address}`);
        out.push(w);
      }
      return out;
    },
  } as unknown as Bus;
}

const sunspec = () => builtinProfiles().get("sunspec");

test("a SunSpec battery whose only SoC (model 124 ChaState) reads not implemented is refused at pairing by name", async () => {
  const driver = new DeviceDriver(bus(image(NI, false)), 1, sunspec());
  await assert.rejects(
    driver.pair(),
    (e: unknown) =>
      isSitegateError(e, "PAIRING_FAILED") &&
      /unit 1 lacks soc_pct, which profile sunspec requires: register \d+ reads "not implemented"/.test((e as Error).message),
  );
  assert.equal(driver.paired, false);
});

test("where model 124 leaves the SoC unimplemented and model 802 gives it, 802's is polled", async () => {
  const driver = new DeviceDriver(bus(image(NI, true)), 1, sunspec());
  const d = await driver.pair();
  assert.equal(d.role, "battery");
  const m = await driver.read(["fast", "slow"]);
  assert.equal(m.soc_pct, 55);
  assert.equal(m.power_w, 1200);
});

test("with both implemented, the first model listed (124) gives the SoC", async () => {
  const driver = new DeviceDriver(bus(image(60, true)), 1, sunspec());
  await driver.pair();
  assert.equal((await driver.read(["fast"])).soc_pct, 60);
});
