// The brand device models over real Modbus TCP, driven by a client we did not write
// (mbpoll) and through the gateway's own Modbus bus (modbus-serial): the brands scenario
// file is valid and has every brand, Sungrow's forced mode moves the battery the way its
// document says, a Victron GX answers per unit id, SMA refuses half a 32-bit value, and
// every battery charges, discharges and goes back to its own mode by its own registers.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { withSite, type SimHandle } from "../support/site.js";
import { loadScenario, BRAND_MODELS } from "../../hw-sim/scenario.js";
import { BATTERY_REGISTERS, BRANDS_YAML, brandsOnTcp, brandsSite } from "../support/brands.js";
import { Bus } from "../../src/modbus/bus.js";
import { silentLogger } from "../../src/log.js";

const run = promisify(execFile);

async function mbpoll(args: string[]): Promise<{ values: Map<number, number>; out: string; code: number }> {
  try {
    const { stdout } = await run("mbpoll", [...args, "-1", "-o", "1"], { timeout: 15000 });
    return { values: parse(stdout), out: stdout, code: 0 };
  } catch (e) {
    const err = e as { stdout?: string; stderr?: string; code?: number };
    return { values: parse(err.stdout ?? ""), out: `${err.stdout ?? ""}${err.stderr ?? ""}`, code: err.code ?? 1 };
  }
}

function parse(out: string): Map<number, number> {
  const m = new Map<number, number>();
  for (const line of out.split("\n")) {
    const r = /^\[(\d+)\]:\s+(-?\d+)/.exec(line.trim());
    if (r) m.set(Number(r[1]), Number(r[2]));
  }
  return m;
}

const at = (site: SimHandle, unit: number) => ["-m", "tcp", "-p", String(site.tcpPorts[0]), "-a", String(unit), "-0"];
const host = "127.0.0.1";
const state = (site: SimHandle, name: string) => site.state().devices[name] as Record<string, any>;

test("brands.yaml is valid and has every brand model", () => {
  const sc = loadScenario(BRANDS_YAML);
  const models = new Set(sc.ports.flatMap((p) => p.devices.map((d) => d.model)));
  for (const m of BRAND_MODELS) assert.ok(models.has(m), `brands.yaml has ${m}`);
});

test("mbpoll over TCP: Sungrow forced charge and discharge, release to self-consumption", async () => {
  await withSite(brandsOnTcp(), async (site) => {
    const type = await mbpoll([...at(site, 1), "-t", "3", "-r", "4999", "-c", "1", host]);
    assert.equal(type.values.get(4999), 0x0e03, type.out);
    assert.equal((await mbpoll([...at(site, 1), "-t", "4", "-r", "13049", host, "2"])).code, 0);
    assert.equal((await mbpoll([...at(site, 1), "-t", "4", "-r", "13050", host, String(0xaa)])).code, 0);
    assert.equal((await mbpoll([...at(site, 1), "-t", "4", "-r", "13051", host, "2500"])).code, 0);
    const charging = await mbpoll([...at(site, 1), "-t", "3", "-r", "13000", "-c", "1", host]);
    assert.equal(charging.values.get(13000)! & 6, 2, "charging bit");
    assert.equal((await mbpoll([...at(site, 1), "-t", "3", "-r", "13021", "-c", "1", host])).values.get(13021), 2500);
    assert.equal(state(site, "sungrow").power_w, -2500);
    assert.equal((await mbpoll([...at(site, 1), "-t", "4", "-r", "13050", host, String(0xbb)])).code, 0);
    assert.equal(state(site, "sungrow").power_w, 2500);
    const refused = await mbpoll([...at(site, 1), "-t", "4", "-r", "13050", host, "17"]);
    assert.notEqual(refused.code, 0);
    assert.match(refused.out, /Illegal data value/i);
    assert.equal((await mbpoll([...at(site, 1), "-t", "4", "-r", "13049", host, "0"])).code, 0);
    assert.equal(state(site, "sungrow").mode, "self-consumption");
  });
});

test("mbpoll over TCP: the Victron GX answers per service unit id; SMA refuses half a value", async () => {
  await withSite(brandsOnTcp(), async (site) => {
    assert.equal((await mbpoll([...at(site, 100), "-t", "4", "-r", "2902", host, "3"])).code, 0);
    assert.equal((await mbpoll([...at(site, 227), "-t", "4", "-r", "37", host, "2000"])).code, 0);
    const p = await mbpoll([...at(site, 100), "-t", "4", "-r", "842", "-c", "1", host]);
    assert.equal(p.values.get(842), 2000, "battery power, positive while charging");
    assert.equal(state(site, "victron").power_w, -2000);
    const wrongUnit = await mbpoll([...at(site, 228), "-t", "4", "-r", "842", "-c", "1", host]);
    assert.notEqual(wrongUnit.code, 0, "no service on unit 228");
    const half = await mbpoll([...at(site, 30), "-t", "4", "-r", "30776", "-c", "1", host]);
    assert.match(half.out, /Illegal data address/i);
    const whole = await mbpoll([...at(site, 30), "-t", "4:int", "-B", "-r", "30775", "-c", "1", host]);
    assert.equal(whole.code, 0, whole.out);
  });
});

/** Each battery's control as the simulator reads its manufacturer's document: raw writes by address. */
type Step = [unit: number, address: number, words: number[]];
const hi32 = (v: number) => [(v >>> 16) & 0xffff, v & 0xffff];
const lo32 = (v: number) => [v & 0xffff, (v >>> 16) & 0xffff];
const f32lo = (v: number) => {
  const b = Buffer.alloc(4);
  b.writeFloatBE(v, 0);
  return [b.readUInt16BE(2), b.readUInt16BE(0)];
};
const all6 = (base: number, v: number): Step[] => Array.from({ length: 6 }, (_, i) => [4, base + i, [v]] as Step);

const CONTROL: Record<string, { unit: number; charge: Step[]; discharge: Step[]; release: Step[] }> = {
  "sungrow-sh": {
    unit: 1,
    charge: [
      [1, 13049, [2]],
      [1, 13050, [0xaa]],
      [1, 13051, [2000]],
    ],
    discharge: [[1, 13050, [0xbb]]],
    release: [
      [1, 13049, [0]],
      [1, 13050, [0xcc]],
    ],
  },
  "huawei-sun2000": {
    unit: 2,
    charge: [
      [2, 47247, hi32(2000)],
      [2, 47083, [60]],
      [2, 47246, [0]],
      [2, 47100, [1]],
    ],
    discharge: [
      [2, 47249, hi32(2000)],
      [2, 47100, [2]],
    ],
    release: [[2, 47100, [0]]],
  },
  "solaredge-storedge": {
    unit: 3,
    charge: [
      [3, 0xe004, [4]],
      [3, 0xe005, [1]],
      [3, 0xe00b, lo32(600)],
      [3, 0xe00e, f32lo(2000)],
      [3, 0xe00d, [3]],
    ],
    discharge: [
      [3, 0xe010, f32lo(2000)],
      [3, 0xe00d, [4]],
    ],
    release: [
      [3, 0xe00d, [7]],
      [3, 0xe004, [1]],
    ],
  },
  "deye-hybrid": {
    unit: 4,
    charge: [[4, 146, [1]], [4, 130, [1]], [4, 128, [40]], ...all6(166, 100), ...all6(172, 1)],
    discharge: [...all6(166, 10), ...all6(154, 2000), ...all6(172, 0x40)],
    release: [[4, 146, [0]]],
  },
  "goodwe-et": {
    unit: 247,
    charge: [
      [247, 47512, [2000]],
      [247, 47511, [11]],
    ],
    discharge: [[247, 47511, [12]]],
    release: [[247, 47511, [1]]],
  },
  "sma-storage": {
    unit: 30,
    charge: [
      [30, 40151, hi32(802)],
      [30, 40149, hi32(-2000 >>> 0)],
    ],
    discharge: [[30, 40149, hi32(2000)]],
    release: [[30, 40151, hi32(803)]],
  },
  "victron-gx": {
    unit: 100,
    charge: [
      [100, 2902, [3]],
      [227, 37, [2000]],
    ],
    discharge: [[227, 37, [-2000 & 0xffff]]],
    release: [[100, 2902, [1]]],
  },
};

test("modbus-serial over TCP: every brand battery charges, discharges and is released, by its own registers", async () => {
  assert.deepEqual(Object.keys(CONTROL).sort(), Object.keys(BATTERY_REGISTERS).sort());
  await withSite(brandsOnTcp(), async (site) => {
    const bus = new Bus({ kind: "tcp", host, port: site.tcpPorts[0] }, silentLogger());
    const read = (unit: number, table: "holding" | "input", address: number, count: number) => bus.read(unit, table, address, count);
    const run = async (steps: Step[]) => {
      for (const [unit, address, words] of steps) await bus.writeRegisters(unit, address, words, { fn: 16 });
    };
    try {
      for (const [model, c] of Object.entries(CONTROL)) {
        const regs = BATTERY_REGISTERS[model];
        assert.ok(await regs.selfConsumption(read, c.unit), `${model} starts in self-consumption`);
        await run(c.charge);
        const charging = await regs.powerW(read, c.unit);
        assert.ok(charging < -1500, `${model} charges: ${charging} W`);
        await run(c.discharge);
        const discharging = await regs.powerW(read, c.unit);
        assert.ok(discharging > 1500, `${model} discharges: ${discharging} W`);
        await run(c.release);
        assert.ok(await regs.selfConsumption(read, c.unit), `${model} is back in self-consumption`);
        const name = Object.entries(site.state().devices).find(([, d]) => d.model === model)![0];
        assert.equal(state(site, name).mode, "self-consumption", model);
      }
    } finally {
      await bus.close();
    }
  });
});

test("brands.yaml's RS-485 bus: every device answers its identity over the pty at 9600 baud", async () => {
  await withSite(brandsSite(), async (site) => {
    const bus = new Bus({ kind: "rtu", path: site.rtuPeers[0], baud: 9600, parity: "none", stopBits: 1 }, silentLogger());
    const text = (w: number[]) =>
      Buffer.from(w.flatMap((x) => [x >> 8, x & 0xff]))
        .toString("latin1")
        .replace(/\0+$/, "");
    try {
      assert.equal((await bus.read(1, "input", 4999, 1))[0], 0x0e03, "Sungrow SH10RT");
      assert.equal(text(await bus.read(2, "holding", 30000, 15)), "SUN2000-10KTL-M1");
      assert.deepEqual(await bus.read(3, "holding", 40000, 2), [0x5375, 0x6e53], "SolarEdge SunSpec");
      assert.equal((await bus.read(4, "holding", 0, 1))[0], 5, "Deye LV three-phase hybrid");
      assert.equal((await bus.read(5, "holding", 0, 1))[0], 3, "Deye single-phase hybrid");
      assert.equal(text(await bus.read(247, "holding", 35011, 5)), "GW10K-ET");
      assert.equal((await bus.read(12, "holding", 0x000b, 1))[0], 70, "EM24-DIN");
      assert.equal((await bus.read(13, "input", 0x000b, 1))[0], 341, "EM340");
      assert.equal((await bus.read(10, "holding", 0xfc02, 1))[0], 0x0089, "SDM72");
      assert.equal((await bus.read(11, "holding", 0xfc02, 1))[0], 0x0020, "SDM120");
      assert.equal((await bus.read(20, "holding", 0, 1)).length, 1, "the unknown device answers");
    } finally {
      await bus.close();
    }
  });
});
