// The brand device models over real Modbus TCP, driven by a client we did not write
// (mbpoll): the brands scenario file is valid and has every brand, Sungrow's forced
// mode moves the battery the way its document says, a Victron GX answers per unit id,
// and SMA refuses half a 32-bit value.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { withSite, type SimHandle } from "../support/site.js";
import { loadScenario, BRAND_MODELS } from "../../hw-sim/scenario.js";
import { BRANDS_YAML, brandsOnTcp } from "../support/brands.js";

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
