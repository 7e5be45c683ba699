// The brand device models over real Modbus TCP, driven by a client we did not write
// (mbpoll) and through the gateway's own Modbus bus (modbus-serial): the brands site
// is valid and has every brand, Sungrow's forced mode moves the battery the way its
// document says, a Victron GX answers per unit id, SMA refuses half a 32-bit value, and
// every battery charges, discharges and goes back to its own mode by its own registers.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { withSite, type SimHandle } from "../support/site.js";
import { parseScenario, BRAND_MODELS } from "../../hw-sim/scenario.js";
import type { Write } from "../../hw-sim/models/brands/index.js";
import { brandsScenario } from "../../hw-sim/models/brands/site.js";
import { BATTERY_BRANDS, brandsOnTcp, brandsSite } from "../support/brands.js";
import { Bus } from "../../src/modbus/bus.js";
import { builtinProfiles } from "../../src/profiles/registry.js";
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

test("the brands site is valid and has every brand model of the table", () => {
  const sc = parseScenario(brandsScenario());
  const models = new Set<string>(sc.ports.flatMap((p) => p.devices.map((d) => d.model)));
  for (const m of BRAND_MODELS) assert.ok(models.has(m), `the brands site has ${m}`);
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

test("modbus-serial over TCP: every brand battery charges, discharges and is released, by its own registers", async () => {
  await withSite(brandsOnTcp(), async (site) => {
    const bus = new Bus({ kind: "tcp", host, port: site.tcpPorts[0] }, silentLogger());
    const read = (unit: number, table: "holding" | "input", address: number, count: number) => bus.read(unit, table, address, count);
    // As a client of each brand waits after connecting (a Huawei does not answer within 1 s of a connect).
    for (const b of BATTERY_BRANDS) bus.setDeviceDelay(b.unit, 0, builtinProfiles().get(b.model).connect_delay_ms);
    try {
      for (const b of BATTERY_BRANDS) {
        const run = async (steps: Write[]) => {
          for (const [address, words, unit] of steps) await bus.writeRegisters(unit ?? b.unit, address, words, { fn: 16 });
        };
        assert.ok(await b.selfConsumption(read, b.unit), `${b.model} starts in self-consumption`);
        await run(b.commands.charge);
        const charging = await b.powerW(read, b.unit);
        assert.ok(charging < -1500, `${b.model} charges: ${charging} W`);
        await run(b.commands.discharge);
        const discharging = await b.powerW(read, b.unit);
        assert.ok(discharging > 1500, `${b.model} discharges: ${discharging} W`);
        await run(b.commands.release);
        assert.ok(await b.selfConsumption(read, b.unit), `${b.model} is back in self-consumption`);
        assert.equal(state(site, b.name).mode, b.ownMode ?? "self-consumption", b.model);
      }
    } finally {
      await bus.close();
    }
  });
});

test("the brands site's RS-485 bus: every device answers its identity over the pty at 9600 baud", async () => {
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
