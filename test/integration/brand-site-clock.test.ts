// The brand batteries at any hour of the site's day: the simulator in this process on an
// injected site clock (00:30, 09:30 and 19:30 local, in two zones), every battery brand
// driven by its profile the way the dispatch ledger drives it (capture the pre-event
// state, charge, discharge, write the state back, read it back), with each device's power
// taken from the simulator's truth (GET /state power_w). The Deye runs under the four
// combinations of the two readings its sources leave open: which time-of-use program an
// out-of-order list of start times puts in force, and whether the program's power or the
// grid-charge current limits a grid charge.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startSim, type SimHandle } from "../../hw-sim/sim.js";
import type { DeviceSpec } from "../../hw-sim/scenario.js";
import { Bus } from "../../src/modbus/bus.js";
import { DeviceDriver } from "../../src/modbus/device/driver.js";
import { ProfileDevice, type ModbusReadings } from "../../src/modbus/device/profile-device.js";
import type { RegisteredDevice } from "../../src/modbus/device/types.js";
import type { DeviceConfig } from "../../src/modbus/config-schema.js";
import { builtinProfiles } from "../../src/profiles/registry.js";
import { silentLogger } from "../../src/log.js";
import { wallToInstant, zoneOffset } from "../../src/util/wall-time.js";
import { BATTERY_BRANDS, brandsOnTcp } from "../support/brands.js";

/** Four three-phase Deyes, one per combination of the two readings, beside brands.yaml's. */
const DEYES = [
  { unit: 40, program_times: "latest-start", grid_charge_limit: "current" },
  { unit: 41, program_times: "latest-start", grid_charge_limit: "program-power" },
  { unit: 42, program_times: "ascending", grid_charge_limit: "current" },
  { unit: 43, program_times: "ascending", grid_charge_limit: "program-power" },
] as const;

/** The Deye's settings an event may change: timer, programs (start, power, SOC, flags), grid charge, work mode. */
const DEYE_SETTINGS: Array<[number, number]> = [
  [128, 3],
  [141, 3],
  [146, 32],
];

const ZONES = ["Europe/Berlin", "Asia/Tokyo"];
const TIMES = ["00:30", "09:30", "19:30"];
const REQUEST_W = 1500;

/** The instant a zone's clocks show `hhmm` on 28 November 2026. */
function siteInstant(zone: string, hhmm: string): number {
  const [h, m] = hhmm.split(":").map(Number);
  return wallToInstant(Date.UTC(2026, 10, 28, h!, m!), zoneOffset(zone));
}

/** The simulator's own record of a device (GET /state), by its unit. */
async function simDevice(site: SimHandle, unit: number): Promise<Record<string, any>> {
  const res = await fetch(`${site.controlUrl}/state`);
  const body = (await res.json()) as { devices: Record<string, Record<string, any>> };
  const d = Object.values(body.devices).find((x) => x.unit === unit)!;
  return typeof d.part_of === "string" ? body.devices[d.part_of]! : d;
}

const NO_READINGS: ModbusReadings = { latest: () => undefined, health: () => undefined, confirm: () => {}, setRemote: () => {} };

/** The Modbus family's device for a profile at a unit, as the daemon makes it (no poller: nothing reads it on its own). */
function profileDevice(bus: Bus, unit: number, profile: string, ratedW?: number): ProfileDevice {
  const driver = new DeviceDriver(bus, unit, builtinProfiles().get(profile));
  const config = { device_id: `${profile}-${unit}`, ...(ratedW ? { rated_power_w: ratedW } : {}) } as DeviceConfig;
  const registered: RegisteredDevice = { config, descriptor: null, fully_configured: true, updated_at: "" };
  return new ProfileDevice(registered, { driverFor: () => driver }, NO_READINGS);
}

/** Charges, discharges and puts back one battery as the ledger does; returns the simulator's power at each step. */
async function event(dev: ProfileDevice, site: SimHandle, unit: number): Promise<{ charging: number; discharging: number }> {
  let pre = await dev.capture("charge");
  await dev.power!.setPower("charge", REQUEST_W);
  const charging = (await simDevice(site, unit)).power_w as number;
  pre = await dev.capture("discharge", pre);
  await dev.power!.setPower("discharge", REQUEST_W);
  const discharging = (await simDevice(site, unit)).power_w as number;
  await dev.revert(pre);
  assert.equal(await dev.verify(pre), undefined, `${dev.id}: the pre-event state reads back`);
  return { charging, discharging };
}

async function deyeSettings(bus: Bus, unit: number): Promise<number[]> {
  const out: number[] = [];
  for (const [at, n] of DEYE_SETTINGS) out.push(...(await bus.read(unit, "holding", at, n)));
  return out;
}

async function withSiteAt(zone: string, instant: number, fn: (site: SimHandle, bus: Bus) => Promise<void>): Promise<void> {
  const sc = brandsOnTcp();
  const port = sc.ports[0]!;
  const deyes: DeviceSpec[] = DEYES.map((d) => ({
    ...d,
    model: "deye-hybrid",
    name: `deye${d.unit}`,
    variant: "three-phase",
    rated_power_w: 8000,
    max_power_w: 5000,
    capacity_wh: 10240,
    soc_pct: 50,
    pv_max_w: 0,
    self_use_load_pct: 0,
  })) as DeviceSpec[];
  const scenario = { ...sc, site: { ...sc.site, timezone: zone }, ports: [{ ...port, devices: [...port.devices, ...deyes] }] };
  const dir = mkdtempSync(join(tmpdir(), "sitegate-sim-"));
  // The site's clock stands still at the instant: what is in force cannot drift past an hour.
  const site = await startSim(scenario, { baseDir: dir, clock: () => instant });
  const bus = new Bus({ kind: "tcp", host: "127.0.0.1", port: site.tcpPorts[0]! }, silentLogger());
  try {
    await fn(site, bus);
  } finally {
    await bus.close();
    await site.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

for (const zone of ZONES) {
  for (const hhmm of TIMES) {
    test(`${hhmm} in ${zone}: every battery brand charges, discharges and is put back; the Deye delivers the request under all four readings`, async () => {
      await withSiteAt(zone, siteInstant(zone, hhmm), async (site, bus) => {
        const state = (await (await fetch(`${site.controlUrl}/state`)).json()) as { site: { local_time: string; timezone: string } };
        assert.deepEqual([state.site.local_time, state.site.timezone], [hhmm, zone], "the site's clock is the injected one");
        const read = (unit: number, table: "holding" | "input", address: number, count: number) => bus.read(unit, table, address, count);

        for (const b of BATTERY_BRANDS) {
          const { model: name, unit } = b;
          const { charging, discharging } = await event(profileDevice(bus, unit, name, 5000), site, unit);
          // The request within 10 %, every brand (the GX too since its profile drives ESS mode 3).
          assert.ok(Math.abs(-charging - REQUEST_W) <= REQUEST_W * 0.1, `${name} charges at the request: ${charging} W`);
          assert.ok(Math.abs(discharging - REQUEST_W) <= REQUEST_W * 0.1, `${name} discharges at the request: ${discharging} W`);
          assert.ok(await b.selfConsumption(read, unit), `${name} is back in its own mode by its registers`);
        }

        for (const d of DEYES) {
          const what = `deye ${d.program_times} / ${d.grid_charge_limit}`;
          const before = await deyeSettings(bus, d.unit);
          const { charging, discharging } = await event(profileDevice(bus, d.unit, "deye-hybrid"), site, d.unit);
          assert.ok(Math.abs(-charging - REQUEST_W) <= REQUEST_W * 0.1, `${what} charges at the request: ${charging} W`);
          assert.ok(Math.abs(discharging - REQUEST_W) <= REQUEST_W * 0.1, `${what} discharges at the request: ${discharging} W`);
          assert.deepEqual(await deyeSettings(bus, d.unit), before, `${what}: every setting the event changed is back`);
          assert.equal((await simDevice(site, d.unit)).mode, "self-consumption", what);
        }
      });
    });
  }
}

test("a Deye setting kept in flash is written only where it differs: a repeated action writes nothing, the write-back what the action wrote (the counts of docs/devices.md)", async () => {
  await withSiteAt("Europe/Berlin", siteInstant("Europe/Berlin", "09:30"), async (site, bus) => {
    const unit = DEYES[0].unit;
    const dev = profileDevice(bus, unit, "deye-hybrid");
    const written = async () => ((await simDevice(site, unit)).writes as Array<{ address: number; values: number[] }>).slice();
    const cells = (ws: Array<{ address: number; values: number[] }>) =>
      ws.flatMap((w) => w.values.map((_, i) => w.address + i)).sort((a, b) => a - b);
    for (const [action, count] of [
      ["charge", 22],
      ["discharge", 16],
    ] as const) {
      const start = (await written()).length;
      const pre = await dev.capture(action);
      await dev.power!.setPower(action, REQUEST_W);
      const act = (await written()).slice(start);
      assert.equal(cells(act).length, count, `${action} on the factory settings: ${JSON.stringify(act)}`);
      await dev.power!.setPower(action, REQUEST_W);
      assert.equal((await written()).length, start + act.length, `the same ${action} again writes nothing`);
      await dev.revert(pre);
      const back = (await written()).slice(start + act.length);
      assert.deepEqual(cells(back), cells(act), `the write-back writes exactly the registers the ${action} changed`);
    }
  });
});
