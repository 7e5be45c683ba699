// Every built-in profile loads, validates, and reads its simulated device; and the
// installer's `sitegate read` / `sitegate scan` work against the simulator as a user runs them.
import { test } from "node:test";
import assert from "node:assert/strict";
import { withSite, demoScenario, type SimHandle } from "../support/site.js";
import { BATTERY_REGISTERS, BRAND_UNITS, brandsOnTcp, brandsSite } from "../support/brands.js";
import { brandRow } from "../../hw-sim/models/brands/index.js";
import { brandPlacements } from "../../hw-sim/models/brands/site.js";
import { builtinProfiles } from "../../src/profiles/registry.js";
import { Bus } from "../../src/modbus/bus.js";
import { DeviceDriver } from "../../src/modbus/device/driver.js";
import { identifyUnit } from "../../src/modbus/device/identify.js";
import { silentLogger } from "../../src/log.js";
import { planControlWrites } from "../../src/modbus/device/control-values.js";
import { isSitegateError } from "../../src/errors.js";
import type { ActionName } from "../../src/profiles/schema.js";
import type { ScenarioInput } from "../support/site.js";
import { runCli } from "../support/cli.js";

/** Which simulated device each built-in profile is checked against, and what it must read. */
type Check = { unit: number; rtu: boolean; type: number; metrics: string[]; site?: "brands" };

const BATTERY = ["power_w", "soc_pct", "ac_power_w"];
const METER = ["power_w", "voltage_v", "frequency_hz", "energy_import_wh"];

/**
 * Which simulated device each built-in profile is checked against, and what it must read.
 * `site: "brands"`: the brands site (hw-sim/models/brands/site.ts) on one TCP port (test/support/brands.ts),
 * whose models were written from the manufacturers' documents apart from the profiles.
 */
const CHECKS: Record<string, Check[]> = {
  sunspec: [
    { unit: 1, rtu: false, type: 10, metrics: ["power_w", "soc_pct", "voltage_v", "frequency_hz", "state", "temperature_c"] },
    { unit: 2, rtu: false, type: 11, metrics: ["power_w", "voltage_v", "state"] },
    { unit: 3, rtu: false, type: 12, metrics: ["power_w", "current_a", "voltage_v", "frequency_hz"] },
  ],
  sdm630: [
    {
      unit: 10,
      rtu: true,
      type: 12,
      metrics: ["power_w", "voltage_v", "current_a", "frequency_hz", "energy_import_wh", "energy_export_wh"],
    },
  ],
  "relay-coils": [{ unit: 11, rtu: true, type: 14, metrics: ["state"] }],
  // The Deye HV profile is paired, read and driven against the Deye model's HV units
  // (`hv`) in test/unit/deye-coverage.test.ts; the brands site has an LV Deye only.
  "deye-hybrid-hv": [],
  // The single-phase Deye profile: the same, against the model's single-phase map (the
  // brands site's deye1p, which identification names by it).
  "deye-hybrid-1p": [],
  ...brandChecks(),
};

/** The brands site's checks by profile: every device of it its profile reads (its row of the brand table). */
function brandChecks(): Record<string, Check[]> {
  const out: Record<string, Check[]> = {};
  for (const u of BRAND_UNITS)
    (out[u.model] ??= []).push({
      site: "brands",
      unit: u.unit,
      rtu: false,
      type: u.kind === "battery" ? 10 : 12,
      metrics: u.kind === "battery" ? BATTERY : METER,
    });
  return out;
}

/** The simulated device of a brands site unit, by its unit id (a Victron GX's VE.Bus unit: the GX). */
function simDevice(site: SimHandle, unit: number): Record<string, any> {
  const devices = site.state().devices;
  const d = Object.values(devices).find((x) => x.unit === unit) as Record<string, any>;
  return typeof d.part_of === "string" ? (devices[d.part_of] as Record<string, any>) : d;
}

test("every built-in profile is checked against the simulator", async () => {
  const names = builtinProfiles().names();
  assert.deepEqual([...names].sort(), Object.keys(CHECKS).sort(), "a new profile needs a check here");
  await withSite(demoScenario({ pv_irradiance: 0.4 }), async (site) => {
    const tcp = new Bus({ kind: "tcp", host: "127.0.0.1", port: site.tcpPorts[0] }, silentLogger());
    const rtu = new Bus({ kind: "rtu", path: site.rtuPeers[0], baud: 9600, parity: "none", stopBits: 1 }, silentLogger());
    try {
      for (const name of names) {
        for (const c of CHECKS[name].filter((x) => !x.site)) {
          const d = new DeviceDriver(c.rtu ? rtu : tcp, c.unit, builtinProfiles().get(name));
          const desc = await d.pair();
          assert.equal(desc.device_type, c.type, `${name} unit ${c.unit}`);
          const m = await d.read(["fast", "slow"]);
          for (const k of c.metrics) assert.equal(typeof m[k], "number", `${name} unit ${c.unit} has ${k}: ${JSON.stringify(m)}`);
          for (const [k, v] of Object.entries(m)) assert.ok(Number.isFinite(v), `${k} is a number`);
        }
      }
      // Not-implemented SunSpec points give no metric: the simulated battery leaves DCA/DCV unset.
      const bat = new DeviceDriver(tcp, 1, builtinProfiles().get("sunspec"));
      const m = await bat.read(["fast", "slow"]);
      assert.ok(!("dc_current_a" in m));
      assert.ok(!("energy_export_wh" in m), "a zero accumulator is 'not implemented' in SunSpec");
    } finally {
      await tcp.close();
      await rtu.close();
    }
  });
});

test("every brand profile reads its simulated device, and its power agrees with the simulator's", async () => {
  await withSite(brandsOnTcp(), async (site) => {
    const tcp = new Bus({ kind: "tcp", host: "127.0.0.1", port: site.tcpPorts[0] }, silentLogger());
    try {
      for (const [name, checks] of Object.entries(CHECKS)) {
        for (const c of checks.filter((x) => x.site === "brands")) {
          const d = new DeviceDriver(tcp, c.unit, builtinProfiles().get(name));
          const desc = await d.pair();
          assert.equal(desc.device_type, c.type, `${name} unit ${c.unit}`);
          const m = await d.read(["fast", "slow"]);
          for (const k of c.metrics) assert.equal(typeof m[k], "number", `${name} unit ${c.unit} has ${k}: ${JSON.stringify(m)}`);
          // A hybrid reads the grid too: the total, or L1's (a GX's ESS setpoint is per phase).
          if (c.type === 10)
            assert.equal(typeof (m.grid_power_w ?? m.grid_power_l1_w), "number", `${name} reads the grid: ${JSON.stringify(m)}`);
          for (const [k, v] of Object.entries(m)) assert.ok(Number.isFinite(v), `${name} ${k} is a number`);
          // Battery power positive while discharging, meters import positive, whatever the brand's sign.
          const sim = simDevice(site, c.unit).power_w as number;
          assert.ok(
            Math.abs(m.power_w - sim) <= Math.max(2, Math.abs(sim) * 0.02),
            `${name} power_w ${m.power_w} vs the simulator's ${sim}`,
          );
        }
      }
    } finally {
      await tcp.close();
    }
  });
});

/** Runs a profile action as ModbusDeviceControl does: plan, write (sub-device units too), read back. */
async function runAction(d: DeviceDriver, action: ActionName, params: { watts?: number; pct?: number }): Promise<void> {
  const writes = await planControlWrites(d, d.profile.actions[action]!, params);
  for (const w of writes) {
    const unit = w.unit ?? d.unit;
    if (w.table === "coil") await d.bus.writeCoils(unit, w.address, w.coils);
    else await d.bus.writeRegisters(unit, w.address, w.words, { fn: w.words.length === 1 ? 6 : 16 });
  }
  await d.readBack(action);
}

test("solaredge-storedge reads the battery's charge limit, not its rated energy, and the grid import-positive", async () => {
  await withSite(brandsOnTcp(), async (site) => {
    const tcp = new Bus({ kind: "tcp", host: "127.0.0.1", port: site.tcpPorts[0] }, silentLogger());
    try {
      const d = new DeviceDriver(tcp, CHECKS["solaredge-storedge"][0].unit, builtinProfiles().get("solaredge-storedge"));
      await d.pair();
      const m = await d.read(["fast", "slow"]);
      const raw = await tcp.read(d.unit, "holding", 0xe142, 6);
      const [ratedWh, chargeW, dischargeW] = [0, 2, 4].map((i) => {
        const b = Buffer.alloc(4);
        b.writeUInt16BE(raw[i + 1], 0);
        b.writeUInt16BE(raw[i], 2);
        return b.readFloatBE(0);
      });
      assert.notEqual(chargeW, ratedWh, "the model's limit and rated energy differ");
      assert.equal(m.max_charge_power_w, chargeW);
      assert.equal(m.max_discharge_power_w, dischargeW);
      const grid = (site.state() as unknown as { site: { grid_w: number } }).site.grid_w;
      assert.ok(Math.abs(grid) > 10, `the site exchanges power with the grid: ${grid}`);
      assert.equal(Math.sign(m.grid_power_w), Math.sign(grid), `grid_power_w ${m.grid_power_w} vs the site's ${grid} (import positive)`);
    } finally {
      await tcp.close();
    }
  });
});

for (const [model, regs] of Object.entries(BATTERY_REGISTERS)) {
  test(`${model}: the profile charges, discharges and releases its simulated device, by the device's own registers`, async () => {
    await withSite(brandsOnTcp(), async (site) => {
      const tcp = new Bus({ kind: "tcp", host: "127.0.0.1", port: site.tcpPorts[0] }, silentLogger());
      const read = (unit: number, table: "holding" | "input", address: number, count: number) => tcp.read(unit, table, address, count);
      try {
        const c = CHECKS[model][0];
        const d = new DeviceDriver(tcp, c.unit, builtinProfiles().get(model));
        await d.pair();
        await runAction(d, "charge", { watts: 2000 });
        const charging = await regs.powerW(read, d.unit);
        assert.ok(charging < -1000, `charging by its own register: ${charging} W`);
        await runAction(d, "discharge", { watts: 2000 });
        const discharging = await regs.powerW(read, d.unit);
        assert.ok(discharging > 1000, `discharging by its own register: ${discharging} W`);
        await runAction(d, "release", {});
        assert.ok(await regs.selfConsumption(read, d.unit), "back in its own self-consumption mode by its registers");
        assert.equal(simDevice(site, c.unit).mode, regs.ownMode ?? "self-consumption");
      } finally {
        await tcp.close();
      }
    });
  });
}

/** What ModbusDeviceControl.apply does: plan the action with the device's scale factors, then write it. */
async function act(d: DeviceDriver, action: ActionName, pct: number): Promise<void> {
  const writes = await planControlWrites(d, d.profile.actions[action]!, { pct });
  for (const w of writes) await d.bus.writeRegisters(d.unit, w.address, w.words, { fn: w.words.length === 1 ? 6 : 16 });
}

for (const sf of [-2, -1, 0, 1] as const) {
  test(`sunspec control writes at control scale factor ${sf}: the raw value is scaled, the device obeys it, out of range writes nothing`, async () => {
    const scenario: ScenarioInput = {
      seed: 7,
      control: { listen: "127.0.0.1:0" },
      site: { base_load_w: 2000, load_noise_pct: 0, pv_irradiance: 1 },
      ports: [
        {
          kind: "tcp",
          listen: "127.0.0.1:0",
          devices: [
            { unit: 1, model: "sunspec-storage", name: "battery", max_power_w: 5000, capacity_wh: 100000, soc_pct: 50, control_sf: sf },
            { unit: 2, model: "sunspec-pv", name: "pv", max_power_w: 6000, control_sf: sf },
          ],
        },
      ],
    };
    await withSite(scenario, async (site) => {
      const tcp = new Bus({ kind: "tcp", host: "127.0.0.1", port: site.tcpPorts[0] }, silentLogger());
      try {
        const bat = new DeviceDriver(tcp, 1, builtinProfiles().get("sunspec"));
        const pv = new DeviceDriver(tcp, 2, builtinProfiles().get("sunspec"));
        await bat.pair();
        await pv.pair();
        const m124 = bat.sunspecModels.find((m) => m.id === 124)!.address;
        const m123 = pv.sunspecModels.find((m) => m.id === 123)!.address;
        const [sfWord] = await tcp.read(1, "holding", m124 + 25, 1);
        assert.equal(sfWord, sf & 0xffff, "InOutWRte_SF publishes control_sf");
        const [pvSfWord] = await tcp.read(2, "holding", m123 + 23, 1);
        assert.equal(pvSfWord, sf & 0xffff, "WMaxLimPct_SF publishes control_sf");

        // 60 % of a 5 kW battery: 3 kW, whatever the scale factor.
        await act(bat, "discharge", 60);
        const out = site.state().devices.battery as Record<string, any>;
        const rte = out.writes.find((w: any) => w.address === m124 + 12);
        assert.deepEqual(rte.values, [Math.round(60 / 10 ** sf)], `OutWRte raw at sf ${sf}`);
        assert.equal(out.power_w, 3000);

        // PV limited to 50 % of 6 kW at full sun.
        await act(pv, "curtail", 50);
        const p = site.state().devices.pv as Record<string, any>;
        assert.deepEqual(p.writes.find((w: any) => w.address === m123 + 5).values, [Math.round(50 / 10 ** sf)]);
        assert.equal(p.setpoint_w, 3000);
        assert.equal(p.power_w, 3000);
        const read = await pv.read(["fast"]);
        assert.equal(read.power_w, 3000);

        // Out of range: refused before any write of the action, the device keeps its state.
        const before = (site.state().devices.battery.writes as unknown[]).length;
        await assert.rejects(act(bat, "discharge", 100.5), (e: unknown) => isSitegateError(e, "CONTROL_VALUE_INVALID"));
        assert.equal((site.state().devices.battery.writes as unknown[]).length, before, "nothing written");
        assert.equal(site.state().devices.battery.power_w, 3000);

        // The device refuses a raw value beyond 100 % at its own scale factor, as hardware does.
        const tooBig = Math.round(100 / 10 ** sf) + 1;
        await assert.rejects(tcp.writeRegisters(1, m124 + 12, [tooBig & 0xffff], { fn: 6 }), (e: unknown) =>
          isSitegateError(e, "MODBUS_EXCEPTION"),
        );
        await assert.rejects(tcp.writeRegisters(2, m123 + 5, [Math.round(100 / 10 ** sf) + 1], { fn: 6 }), (e: unknown) =>
          isSitegateError(e, "MODBUS_EXCEPTION"),
        );
        assert.equal(site.state().devices.battery.power_w, 3000);
      } finally {
        await tcp.close();
      }
    });
  });
}

test("sitegate read prints decoded metrics as JSON and exits 1 with one line when nothing answers", async () => {
  await withSite(demoScenario({ pv_irradiance: 0.5 }), async (site) => {
    const { stdout, code, stderr } = await runCli(
      "read",
      "--endpoint",
      `tcp://127.0.0.1:${site.tcpPorts[0]}`,
      "--unit",
      "2",
      "--profile",
      "sunspec",
      "--json",
    );
    assert.equal(code, 0, stderr);
    const out = JSON.parse(stdout);
    assert.equal(out.device.manufacturer, "SimEnergy");
    assert.equal(out.device.max_power_w, 6000);
    assert.ok(Math.abs(out.metrics.power_w - 3000) <= 31);
    // States in words, by the same table as the status page's (the profile's enums).
    const bat = await runCli("read", "--endpoint", `tcp://127.0.0.1:${site.tcpPorts[0]}`, "--unit", "1", "--profile", "sunspec");
    assert.equal(bat.code, 0, bat.stderr);
    assert.match(bat.stdout, /^battery_state\s+[1-7] \((off|empty|discharging|charging|full|holding|testing)\)$/m);
    assert.match(bat.stdout, /^storage_mode\s+0 \(own control\)$/m);
    assert.match(bat.stdout, /^device_type\s+10 \(battery inverter\)$/m);
    const rtu = await runCli("read", "--endpoint", `rtu:${site.rtuPeers[0]}?baud=9600`, "--unit", "10", "--profile", "sdm630");
    assert.equal(rtu.code, 0, rtu.stderr);
    assert.match(rtu.stdout, /^power_w\s+-?\d/m);
    site.setFault({ device: "pv", fault: "no_answer" });
    const dead = await runCli("read", "--endpoint", `tcp://127.0.0.1:${site.tcpPorts[0]}`, "--unit", "2", "--profile", "sunspec");
    assert.equal(dead.code, 1);
    assert.equal(dead.stderr.trim().split("\n").length, 1);
    assert.match(dead.stderr, /did not answer/);
    const usage = await runCli("read", "--endpoint", "ftp://x", "--unit", "1", "--profile", "sunspec");
    assert.equal(usage.code, 2);
  });
});

test("sitegate scan lists the units that answer", async () => {
  await withSite(demoScenario(), async (site) => {
    const tcp = await runCli("scan", "--endpoint", `tcp://127.0.0.1:${site.tcpPorts[0]}`, "--json");
    assert.equal(tcp.code, 0, tcp.stderr);
    assert.deepEqual(
      JSON.parse(tcp.stdout).found.map((f: { unit: number }) => f.unit),
      [1, 2, 3],
    );
    const rtu = await runCli(
      "scan",
      "--endpoint",
      `rtu:${site.rtuPeers[0]}?baud=9600`,
      "--from",
      "8",
      "--to",
      "12",
      // A timeout no loaded machine misses an answer by (8, 9 and 12 are silent: 2 s each).
      "--timeout-ms",
      "1000",
      "--json",
    );
    assert.equal(rtu.code, 0, rtu.stderr);
    assert.deepEqual(
      JSON.parse(rtu.stdout).found.map((f: { unit: number }) => f.unit),
      [10, 11],
    );
  });
});

test("sitegate scan --identify names the profile of each unit, and none for a device no profile identifies", async () => {
  await withSite(demoScenario(), async (site) => {
    const tcp = await runCli(
      "scan",
      "--endpoint",
      `tcp://127.0.0.1:${site.tcpPorts[0]}`,
      "--identify",
      "--profiles-dir",
      "/nonexistent",
      "--json",
    );
    assert.equal(tcp.code, 0, tcp.stderr);
    const found = JSON.parse(tcp.stdout).found as Array<{ unit: number; profiles: Array<{ profile: string }> }>;
    assert.deepEqual(
      found.map((f) => [f.unit, f.profiles.map((p) => p.profile)]),
      [
        [1, ["sunspec"]],
        [2, ["sunspec"]],
        [3, ["sunspec"]],
      ],
    );
    const rtu = await runCli(
      "scan",
      "--endpoint",
      `rtu:${site.rtuPeers[0]}?baud=9600`,
      "--from",
      "10",
      "--to",
      "11",
      // With both cores busy 100 ms missed a first answer and 200 ms none: 500 ms, not more,
      // as identification waits it out on every identity register a device does not answer.
      "--timeout-ms",
      "500",
      "--identify",
    );
    assert.equal(rtu.code, 0, rtu.stderr);
    // The SDM630 profile names no expectation and the relay board has no identity: answering is not a match.
    assert.match(rtu.stdout, /^unit 10: answers, not a known device$/m);
    assert.match(rtu.stdout, /^unit 11: answers, not a known device$/m);
    // In words, each SunSpec device by the role its models give it.
    const words = await runCli(
      "scan",
      "--endpoint",
      `tcp://127.0.0.1:${site.tcpPorts[0]}`,
      "--to",
      "5",
      "--identify",
      "--profiles-dir",
      "/nonexistent",
    );
    assert.equal(words.code, 0, words.stderr);
    assert.equal(
      words.stdout,
      "unit 1: SunSpec battery inverter (profile sunspec)\nunit 2: SunSpec inverter (profile sunspec)\nunit 3: SunSpec meter (profile sunspec)\n",
    );
  });
});

test("sitegate scan --identify names every brand model on its bus, and nothing on a device no profile describes", async () => {
  await withSite(brandsSite(), async (site) => {
    // Answers are awaited 500 ms (with both cores busy 100 ms missed a first answer, 200 ms
    // none; identification waits it out on every identity register a device does not
    // answer); silent ids get a short timeout, which cannot make them answer.
    const scan = async (endpoint: string, range: string[], timeoutMs = 500) => {
      const r = await runCli(
        "scan",
        "--endpoint",
        endpoint,
        ...range,
        "--timeout-ms",
        String(timeoutMs),
        "--identify",
        "--profiles-dir",
        "/nonexistent",
        "--json",
      );
      assert.equal(r.code, 0, r.stderr);
      const found = JSON.parse(r.stdout).found as Array<{ unit: number; profiles: Array<{ profile: string }> }>;
      return Object.fromEntries(found.map((f) => [f.unit, f.profiles.map((p) => p.profile).sort()]));
    };
    // The RS-485 bus, every unit 1-20 and the devices beyond: a device its profile reads is
    // named by that profile alone (the SolarEdge carries the SunSpec marker too; the
    // single-phase Deye by its own profile); a device whose variant no profile reads (the
    // EM24-DIN) and the unknown device (20) answer, and no profile may claim them. Silent ids get a short
    // timeout, which cannot make them answer.
    const rtu = `rtu:${site.rtuPeers[0]}?baud=9600`;
    const onBus = brandPlacements().filter((d) => d.placement.bus === "rtu");
    const want: Record<number, string[]> = { 20: [] };
    for (const d of onBus) {
      const p = d.placement.profile;
      want[d.placement.unit] = p === false ? [] : [p ?? d.model];
    }
    const units = [...new Set([...Array.from({ length: 20 }, (_, i) => i + 1), ...onBus.map((d) => d.placement.unit)])].sort(
      (a, b) => a - b,
    );
    const bus: Record<number, string[]> = {};
    for (let i = 0; i < units.length;) {
      // A run of consecutive units that all answer, or all do not.
      const answers = units[i]! in want;
      let j = i;
      while (j + 1 < units.length && units[j + 1] === units[j]! + 1 && units[j + 1]! in want === answers) j++;
      Object.assign(bus, await scan(rtu, ["--from", String(units[i]), "--to", String(units[j])], answers ? 500 : 100));
      i = j + 1;
    }
    assert.deepEqual(bus, want);
    // Each network device on its own port: the unit its profile pairs is named, its other units (a GX's system unit) are not.
    const onNet = brandPlacements().filter((d) => d.placement.bus === "tcp");
    for (const [i, d] of onNet.entries()) {
      const row = brandRow(d.model);
      const spec = row.schema.parse(d.device);
      const paired = row.pairedUnit?.(spec) ?? d.placement.unit;
      for (const u of row.units?.(spec) ?? [d.placement.unit]) {
        const endpoint = `tcp://127.0.0.1:${site.tcpPorts[i]}`;
        assert.deepEqual(
          await scan(endpoint, ["--from", String(u), "--to", String(u)]),
          { [u]: u === paired ? [d.model] : [] },
          `${d.placement.name} unit ${u}`,
        );
      }
    }
  });
});

test("on one port where the GX's unit 100 answers, identification names each unit by its own registers", async () => {
  await withSite(brandsOnTcp(), async (site) => {
    const tcp = new Bus({ kind: "tcp", host: "127.0.0.1", port: site.tcpPorts[0] }, silentLogger());
    try {
      const named: Record<number, string[]> = {};
      for (const u of [1, 2, 3, 4, 5, 10, 11, 12, 13, 14, 20, 30, 100, 227, 247])
        named[u] = (await identifyUnit(tcp, u, builtinProfiles(), 200)).map((m) => m.profile);
      assert.deepEqual(named, {
        1: ["sungrow-sh"],
        2: ["huawei-sun2000"],
        3: ["solaredge-storedge"],
        4: ["deye-hybrid"],
        5: ["deye-hybrid-1p"],
        10: ["sdm72"],
        11: ["sdm120"],
        12: [],
        13: ["em24"],
        14: ["em24"],
        20: [],
        30: ["sma-storage"],
        100: [],
        227: ["victron-gx"],
        247: ["goodwe-et"],
      });
    } finally {
      await tcp.close();
    }
  });
});
