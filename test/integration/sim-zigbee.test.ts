// The simulator as a zigbee2mqtt bridge on a real mosquitto: what a gateway subscribing to
// zigbee2mqtt's documented topics sees, what its /set commands do to the site (the grid
// meter follows a plug's load), and the faults (ignore_writes, the bridge going offline).
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { withSite, type ScenarioInput, type SimHandle, control } from "../support/site.js";
import { startSim } from "../../hw-sim/sim.js";
import { startLocalBroker, Recorder, type LocalBroker } from "../support/mosquitto.js";
import { until } from "../support/wait.js";
import { parseScenario } from "../../hw-sim/scenario.js";
import { SiteModel } from "../../hw-sim/site-model.js";
import { ZigbeePlug, ZigbeeThermostat } from "../../hw-sim/zigbee-devices.js";

const B = "zigbee2mqtt";
const PLUG = "washer-plug";
const TRV = "living-trv";
const PLUG_IEEE = "0x00158d0001a2b3c4";

function scenario(broker: string, over: Partial<NonNullable<ScenarioInput["zigbee"]>> = {}): ScenarioInput {
  return {
    seed: 7,
    control: { listen: "127.0.0.1:0" },
    site: { base_load_w: 2000, load_noise_pct: 0, pv_irradiance: 0 },
    ports: [{ kind: "tcp", listen: "127.0.0.1:0", devices: [{ unit: 3, model: "sunspec-meter", name: "grid" }] }],
    zigbee: {
      broker,
      base_topic: B,
      devices: [
        { friendly_name: PLUG, ieee_address: PLUG_IEEE, kind: "plug", metering: true, load_w: 2000 },
        { friendly_name: TRV, kind: "thermostat", metering: true, load_w: 1500, setpoint_c: 21 },
      ],
      ...over,
    },
  };
}

async function withZigbeeSite(
  fn: (site: SimHandle, rec: Recorder, broker: LocalBroker) => Promise<void>,
  over: Partial<NonNullable<ScenarioInput["zigbee"]>> = {},
): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "sitegate-z2m-"));
  const broker = await startLocalBroker(join(dir, "broker"));
  try {
    await withSite(scenario(broker.url, over), async (site) => {
      const rec = await Recorder.connect(broker.url, [`${B}/#`]);
      try {
        await rec.wait(`${B}/bridge/state`, (m) => m.json?.state === "online");
        await fn(site, rec, broker);
      } finally {
        await rec.end();
      }
    });
  } finally {
    await broker.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

const grid = (site: SimHandle) => site.state().devices.grid.power_w as number;
const dev = (site: SimHandle, name: string) => site.state().devices[name] as Record<string, any>;

test("the bridge publishes retained bridge/state, bridge/info, bridge/devices with exposes, availability and device state", async () => {
  await withZigbeeSite(
    async (_site, rec) => {
      const state = await rec.wait(`${B}/bridge/state`);
      assert.deepEqual(state.json, { state: "online" });
      assert.equal(state.retain, true, "bridge/state is retained");
      const hc = rec.mark();
      await rec.publish(`${B}/bridge/request/health_check`, { transaction: 41 });
      assert.deepEqual((await rec.wait(`${B}/bridge/response/health_check`, () => true, hc)).json, {
        data: { healthy: true },
        status: "ok",
        transaction: 41,
      });
      const info = await rec.wait(`${B}/bridge/info`);
      assert.equal(info.retain, true);
      assert.equal(typeof info.json.version, "string");

      const list = await rec.wait(`${B}/bridge/devices`);
      assert.equal(list.retain, true, "bridge/devices is retained");
      assert.ok(Array.isArray(list.json));
      assert.equal(list.json[0].type, "Coordinator", "the coordinator is listed, as zigbee2mqtt lists it");
      const plug = list.json.find((d: any) => d.friendly_name === PLUG);
      assert.equal(plug.ieee_address, PLUG_IEEE);
      assert.equal(plug.type, "Router");
      assert.equal(plug.supported, true);
      assert.equal(plug.interview_completed, true);
      const sw = plug.definition.exposes.find((e: any) => e.type === "switch");
      assert.deepEqual(
        {
          name: sw.features[0].name,
          property: sw.features[0].property,
          access: sw.features[0].access,
          on: sw.features[0].value_on,
          off: sw.features[0].value_off,
        },
        { name: "state", property: "state", access: 7, on: "ON", off: "OFF" },
      );
      const prop = (d: any, name: string) => d.definition.exposes.find((e: any) => e.property === name);
      assert.equal(prop(plug, "power").unit, "W");
      assert.equal(prop(plug, "energy").unit, "kWh");

      const trv = list.json.find((d: any) => d.friendly_name === TRV);
      assert.match(trv.ieee_address, /^0x[0-9a-f]{16}$/, "an ieee address is made up when the scenario has none");
      const climate = trv.definition.exposes.find((e: any) => e.type === "climate");
      const f = (n: string) => climate.features.find((x: any) => x.name === n);
      assert.equal(f("occupied_heating_setpoint").access & 2, 2, "the setpoint can be set");
      assert.equal(f("occupied_heating_setpoint").unit, "°C");
      assert.equal(f("local_temperature").access & 2, 0, "the room temperature cannot");
      assert.ok(f("system_mode").values.includes("heat"));
      assert.deepEqual(f("running_state").values, ["idle", "heat"]);

      for (const name of [PLUG, TRV]) {
        const a = await rec.wait(`${B}/${name}/availability`);
        assert.deepEqual(a.json, { state: "online" });
        assert.equal(a.retain, true, "availability is retained");
      }
      // State messages are not retained: these are the periodic reports (every second here).
      const plugState = await rec.wait(`${B}/${PLUG}`);
      assert.equal(plugState.retain, false);
      assert.equal(plugState.json.state, "ON");
      assert.ok(Math.abs(plugState.json.power - 2000) <= 40, `power ${plugState.json.power}`);
      assert.equal(typeof plugState.json.energy, "number");
      const trvState = await rec.wait(`${B}/${TRV}`);
      assert.equal(trvState.json.occupied_heating_setpoint, 21);
      assert.equal(trvState.json.running_state, "idle");
      assert.equal(typeof trvState.json.local_temperature, "number");
      const next = rec.mark();
      await rec.wait(`${B}/${PLUG}`, () => true, next);
    },
    { report_interval_s: 1 },
  );
});

test("a /set OFF turns the plug off: it reports OFF and the grid meter drops by about its load; /get and /set/state work too", async () => {
  await withZigbeeSite(async (site, rec) => {
    const before = grid(site);
    assert.ok(Math.abs(before - 4000) < 100, `base 2000 + plug 2000, got ${before}`);
    let from = rec.mark();
    await rec.publish(`${B}/${PLUG}/set`, { state: "OFF" });
    const off = await rec.wait(`${B}/${PLUG}`, (m) => m.json?.state === "OFF", from);
    assert.equal(off.json.power, 0);
    const after = grid(site);
    assert.ok(Math.abs(before - after - 2000) < 100, `grid ${before} -> ${after}`);
    assert.equal(dev(site, PLUG).state, "OFF");
    assert.equal(dev(site, PLUG).power_w, 0);
    assert.deepEqual(dev(site, PLUG).writes.at(-1).payload, { state: "OFF" });

    from = rec.mark();
    await rec.publish(`${B}/${PLUG}/get`, { state: "" });
    assert.equal((await rec.wait(`${B}/${PLUG}`, () => true, from)).json.state, "OFF");

    from = rec.mark();
    await rec.publish(`${B}/${PLUG}/set/state`, "ON");
    await rec.wait(`${B}/${PLUG}`, (m) => m.json?.state === "ON", from);
    assert.ok(Math.abs(grid(site) - before) < 100, `grid back to ${before}: ${grid(site)}`);

    // Addressed by ieee_address, as zigbee2mqtt allows.
    from = rec.mark();
    await rec.publish(`${B}/${PLUG_IEEE}/set`, { state: "TOGGLE" });
    await rec.wait(`${B}/${PLUG}`, (m) => m.json?.state === "OFF", from);

    // A value the device does not take is logged on bridge/logging and changes nothing.
    from = rec.mark();
    await rec.publish(`${B}/${PLUG}/set`, { state: "MAYBE" });
    const err = await rec.wait(`${B}/bridge/logging`, (m) => m.json?.level === "error", from);
    assert.match(err.json.message, /MAYBE/);
    assert.equal(dev(site, PLUG).state, "OFF");
  });
});

test("ignore_writes on a Zigbee device: /set is not obeyed, the bridge logs the timeout, clearing the fault restores it", async () => {
  await withZigbeeSite(async (site, rec) => {
    const bad = await control(site, "POST", "/faults", { device: PLUG, fault: "crc" });
    assert.equal(bad.status, 400);
    assert.match(bad.json.error, /does not apply to a Zigbee device/);
    assert.equal((await control(site, "POST", "/faults", { device: PLUG, fault: "ignore_writes" })).status, 200);
    assert.deepEqual(dev(site, PLUG).faults, [{ fault: "ignore_writes" }]);
    const before = grid(site);

    const from = rec.mark();
    await rec.publish(`${B}/${PLUG}/set`, { state: "OFF" });
    const log = await rec.wait(`${B}/bridge/logging`, (m) => String(m.json?.message).includes(PLUG), from);
    assert.equal(log.json.level, "error");
    assert.deepEqual(
      rec.since(`${B}/${PLUG}`, from).filter((m) => m.json?.state === "OFF"),
      [],
      "no OFF state was reported",
    );
    assert.equal(dev(site, PLUG).state, "ON");
    assert.equal(dev(site, PLUG).writes.at(-1).ignored, "ignore_writes");
    assert.ok(Math.abs(grid(site) - before) < 100, "the load is still on");

    assert.equal((await control(site, "DELETE", `/faults/${PLUG}`)).status, 200);
    const again = rec.mark();
    await rec.publish(`${B}/${PLUG}/set`, { state: "OFF" });
    await rec.wait(`${B}/${PLUG}`, (m) => m.json?.state === "OFF", again);
    assert.ok(Math.abs(before - grid(site) - 2000) < 100);
  });
});

test("the bridge offline: bridge/state and every device's availability go offline, /set is not obeyed, and both come back", async () => {
  await withZigbeeSite(async (site, rec, broker) => {
    assert.equal((await control(site, "POST", "/zigbee/bridge", { state: "sideways" })).status, 400);
    let from = rec.mark();
    const r = await control(site, "POST", "/zigbee/bridge", { state: "offline" });
    assert.equal(r.status, 200);
    assert.equal(r.json.bridge, "offline");
    const st = await rec.wait(`${B}/bridge/state`, () => true, from);
    assert.deepEqual(st.json, { state: "offline" });
    for (const name of [PLUG, TRV]) await rec.wait(`${B}/${name}/availability`, (m) => m.json?.state === "offline", from);
    assert.equal(site.state().zigbee?.bridge, "offline");

    // A client that connects now gets the retained offline state.
    const late = await Recorder.connect(broker.url, [`${B}/bridge/state`]);
    try {
      const m = await late.wait(`${B}/bridge/state`);
      assert.equal(m.retain, true);
      assert.deepEqual(m.json, { state: "offline" });
    } finally {
      await late.end();
    }

    await rec.publish(`${B}/${PLUG}/set`, { state: "OFF" });
    await until(() => dev(site, PLUG).writes.some((w: any) => w.ignored === "bridge offline"), "the command recorded as not read");
    assert.equal(dev(site, PLUG).state, "ON");

    from = rec.mark();
    assert.equal((await control(site, "POST", "/zigbee/bridge", { state: "online" })).status, 200);
    await rec.wait(`${B}/bridge/state`, (m) => m.json?.state === "online", from);
    for (const name of [PLUG, TRV]) await rec.wait(`${B}/${name}/availability`, (m) => m.json?.state === "online", from);
    const plug = await rec.wait(`${B}/${PLUG}`, () => true, from);
    assert.equal(plug.json.state, "ON", "the command sent while offline was never carried out");
  });
});

test("no_answer on a Zigbee device: its availability goes offline, and online again when cleared", async () => {
  await withZigbeeSite(async (site, rec) => {
    let from = rec.mark();
    assert.equal((await control(site, "POST", "/faults", { device: TRV, fault: "no_answer" })).status, 200);
    await rec.wait(`${B}/${TRV}/availability`, (m) => m.json?.state === "offline", from);
    assert.equal(dev(site, TRV).online, false);
    from = rec.mark();
    assert.equal((await control(site, "DELETE", "/faults")).status, 200);
    await rec.wait(`${B}/${TRV}/availability`, (m) => m.json?.state === "online", from);
    assert.equal(dev(site, TRV).online, true);
  });
});

test("a thermostat acknowledges a setpoint change: heating starts and its heater counts in the grid; out-of-range values are refused", async () => {
  await withZigbeeSite(async (site, rec) => {
    const before = grid(site);
    let from = rec.mark();
    await rec.publish(`${B}/${TRV}/set`, { occupied_heating_setpoint: 23 });
    const ack = await rec.wait(`${B}/${TRV}`, (m) => m.json?.occupied_heating_setpoint === 23, from);
    assert.equal(ack.json.running_state, "heat", "the room at 21 degC is below 23");
    assert.ok(Math.abs(ack.json.power - 1500) <= 30, `heater power ${ack.json.power}`);
    assert.ok(Math.abs(grid(site) - before - 1500) < 100, `grid ${before} -> ${grid(site)}`);
    const v = dev(site, TRV);
    assert.equal(v.setpoint_c, 23);
    assert.equal(v.running_state, "heat");

    from = rec.mark();
    await rec.publish(`${B}/${TRV}/set`, { occupied_heating_setpoint: 17 });
    const idle = await rec.wait(`${B}/${TRV}`, (m) => m.json?.occupied_heating_setpoint === 17, from);
    assert.equal(idle.json.running_state, "idle");
    assert.equal(idle.json.power, 0);
    assert.ok(Math.abs(grid(site) - before) < 100);

    from = rec.mark();
    await rec.publish(`${B}/${TRV}/set`, { occupied_heating_setpoint: 40 });
    const err = await rec.wait(`${B}/bridge/logging`, (m) => m.json?.level === "error", from);
    assert.match(err.json.message, /not in range/);
    assert.equal(dev(site, TRV).setpoint_c, 17);

    // By hand: the room is cold, the thermostat heats and reports it at once.
    from = rec.mark();
    assert.equal((await control(site, "POST", `/devices/${TRV}`, { local_temperature: 15 })).status, 200);
    const cold = await rec.wait(`${B}/${TRV}`, (m) => m.json?.local_temperature === 15, from);
    assert.equal(cold.json.running_state, "heat");
    assert.equal((await control(site, "POST", `/devices/${TRV}`, { colour: "red" })).status, 400);
  });
});

test("the bridge logs in with a username and password; a wrong password fails the start with a clear error", async () => {
  const dir = mkdtempSync(join(tmpdir(), "sitegate-z2m-"));
  const broker = await startLocalBroker(join(dir, "broker"), { users: { z2m: "z2m-secret" } });
  try {
    await assert.rejects(
      startSim(scenario(broker.url, { username: "z2m", password: "wrong" })),
      /zigbee: cannot connect to the broker mqtt:\/\/127\.0\.0\.1:\d+: .*(Not authorized|Bad username)/i,
    );
    await withSite(scenario(broker.url, { username: "z2m", password: "z2m-secret" }), async () => {
      const rec = await Recorder.connect(broker.url, [`${B}/bridge/state`], { username: "z2m", password: "z2m-secret" });
      try {
        assert.deepEqual((await rec.wait(`${B}/bridge/state`)).json, { state: "online" });
      } finally {
        await rec.end();
      }
    });
  } finally {
    await broker.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("after a broker restart the bridge reconnects and publishes its retained topics again", async () => {
  const dir = mkdtempSync(join(tmpdir(), "sitegate-z2m-"));
  let broker = await startLocalBroker(join(dir, "broker"));
  try {
    await withSite(scenario(broker.url), async (site) => {
      await broker.stop(); // no persistence: the retained messages are gone with it
      await until(() => site.state().zigbee?.connected === false, "the bridge notices the loss");
      broker = await startLocalBroker(join(dir, "broker2"), { port: broker.port });
      const rec = await Recorder.connect(broker.url, [`${B}/#`]);
      try {
        assert.deepEqual((await rec.wait(`${B}/bridge/state`)).json, { state: "online" });
        const list = await rec.wait(`${B}/bridge/devices`);
        assert.ok(list.json.some((d: any) => d.friendly_name === PLUG));
        await rec.wait(`${B}/${PLUG}/availability`, (m) => m.json?.state === "online");
        const from = rec.mark();
        await rec.publish(`${B}/${PLUG}/set`, { state: "OFF" });
        await rec.wait(`${B}/${PLUG}`, (m) => m.json?.state === "OFF", from);
      } finally {
        await rec.end();
      }
    });
  } finally {
    await broker.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("plug metering and the room model are a function of the seed and the clock", () => {
  let now = Date.UTC(2025, 0, 15, 12, 0, 0);
  const clock = () => now;
  const siteSpec = parseScenario(scenario("mqtt://127.0.0.1:1")).site;
  const spec = (kind: "plug" | "thermostat") =>
    parseScenario(
      scenario("mqtt://127.0.0.1:1", { devices: [{ friendly_name: "d", kind, load_w: 2000, load_noise_pct: 5, setpoint_c: 21 }] }),
    ).zigbee!.devices[0];
  const a = new SiteModel(siteSpec, 7, clock);
  const b = new SiteModel(siteSpec, 7, clock);
  const c = new SiteModel(siteSpec, 8, clock);
  const pa = new ZigbeePlug(spec("plug"), a, 10_000);
  const pb = new ZigbeePlug(spec("plug"), b, 10_000);
  const pc = new ZigbeePlug(spec("plug"), c, 10_000);
  const seqA: number[] = [];
  const seqB: number[] = [];
  const seqC: number[] = [];
  for (let i = 0; i < 20; i++) {
    now += 1000;
    seqA.push(pa.loadW());
    seqB.push(pb.loadW());
    seqC.push(pc.loadW());
  }
  assert.deepEqual(seqA, seqB, "same seed, same readings");
  assert.notDeepEqual(seqA, seqC, "another seed, other readings");
  assert.ok(
    seqA.every((w) => Math.abs(w - 2000) <= 100),
    "within the 5 % noise",
  );
  assert.equal(pa.ieee, pb.ieee);
  assert.notEqual(pa.ieee, pc.ieee);

  // The room warms while the heater runs, stops just above the setpoint, then cools toward ambient.
  const site = new SiteModel(siteSpec, 7, clock);
  const t = new ZigbeeThermostat(spec("thermostat"), site, 10_000);
  site.advance();
  assert.equal(t.apply({ occupied_heating_setpoint: 22 }).changed.length, 1);
  assert.equal(t.heating, true);
  const start = t.roomC;
  now += 20 * 60_000;
  site.advance();
  assert.ok(t.roomC > start, `warmer after 20 min of heating: ${start} -> ${t.roomC}`);
  for (let i = 0; i < 180 && t.heating; i++) {
    now += 60_000;
    site.advance();
  }
  assert.equal(t.heating, false, "heating stopped");
  assert.ok(t.roomC >= 22.2 && t.roomC < 22.3, `stopped at ${t.roomC}`);
  assert.ok(t.energyKwh > 0.5, `energy ${t.energyKwh}`);
  t.apply({ system_mode: "off" });
  const warm = t.roomC;
  now += 3 * 3_600_000;
  site.advance();
  assert.ok(t.roomC < warm && t.roomC > 12, `cools toward ambient 12: ${warm} -> ${t.roomC}`);
  assert.equal(t.heating, false, "mode off never heats");
});

test("bad zigbee blocks are refused with the path and the reason", () => {
  const base = scenario("mqtt://127.0.0.1:1883");
  const err = (over: Record<string, unknown>) => {
    try {
      parseScenario({ ...base, zigbee: { ...base.zigbee!, ...over } });
    } catch (e) {
      return (e as Error).message;
    }
    return "accepted";
  };
  assert.match(err({ devices: [{ friendly_name: "x", kind: "bulb" }] }), /zigbee\.devices\[0\]\.kind: must be "plug" or "thermostat"/);
  assert.match(
    err({ devices: [{ friendly_name: "x", kind: "plug", ieee_address: "0x12" }] }),
    /zigbee\.devices\[0\]\.ieee_address: must be "0x" and 16 lowercase hex digits/,
  );
  assert.match(err({ broker: "http://127.0.0.1:1883" }), /zigbee\.broker: must be "mqtt:\/\/host:port"/);
  assert.match(err({ devices: [{ friendly_name: "a/set", kind: "plug" }] }), /friendly_name: must not contain the segments set/);
  assert.match(err({ devices: [{ friendly_name: "grid", kind: "plug" }] }), /"grid" is already the name of another device/);
  assert.match(err({ devices: [{ friendly_name: "p", kind: "plug", room_c: 20 }] }), /room_c: only a thermostat has a room/);
  assert.match(err({ devices: [{ friendly_name: "p", kind: "plug", watts: 20 }] }), /zigbee\.devices\[0\]\.watts: unknown key/);
  assert.match(err({ devices: [] }), /zigbee\.devices/);
  assert.equal(err({}), "accepted");
});
