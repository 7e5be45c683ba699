// What the demo prints: kW with three significant digits, codes with their names, devices
// in device_id order whatever order they arrived in.
import { test } from "node:test";
import assert from "node:assert/strict";
import { deviceRows, gridText, kw, opModeName, screen, stateName, type DemoDevice } from "../support/demo-view.js";
import { demoPorts } from "../support/demo-ports.js";

test("kW has three significant digits", () => {
  assert.equal(kw(4030.488), "4.03 kW");
  assert.equal(kw(4030), "4.03 kW");
  assert.equal(kw(-512.3), "-0.512 kW");
  assert.equal(kw(12345), "12.3 kW");
  assert.equal(kw(123456), "123 kW");
  assert.equal(kw(0.2), "0.00 kW");
  assert.equal(kw(undefined), "–");
});

test("op modes, SunSpec St and relay coils are named by the profiles' one table", () => {
  assert.deepEqual([0, 1, 2, 3, 4].map(opModeName), ["unknown", "local automatic", "remote dispatch", "standby", "fault"]);
  assert.equal(stateName("sunspec", 8), "standby");
  assert.equal(stateName("sunspec", 4), "producing");
  assert.equal(stateName("sunspec", 42), "state 42");
  assert.equal(stateName("relay-coils", 0b1011), "coils 1:on 2:on 3:off 4:on");
});

test("rows come in device_id order with names, never raw codes", () => {
  const rows = deviceRows([
    { device_id: "sdm", profile: "sdm630", identity: "77295082", metrics: { power_w: 1990.4 } },
    {
      device_id: "battery",
      profile: "sunspec",
      identity: "SimEnergy SimStore",
      op_mode: 2,
      metrics: { power_w: 3000, state: 4, soc_pct: 49.91 },
    },
    { device_id: "relay", profile: "relay-coils", identity: "", metrics: { state: 15 } },
  ]);
  assert.deepEqual(
    rows.map((r) => r[0]),
    ["battery", "relay", "sdm"],
  );
  assert.deepEqual(rows[0].slice(0, 5), ["battery", "3.00 kW", "producing", "remote dispatch", "SoC 49.9 %"]);
  assert.equal(rows[1][2], "coils 1:on 2:on 3:on 4:on");
  assert.equal(rows[2][1], "1.99 kW import");
  assert.equal(gridText(-1264), "1.26 kW export");
});

test("the demo's ports come from their variables; a bad or shared one is named", () => {
  assert.equal(demoPorts({}).api.port, 8443);
  assert.equal(demoPorts({ SITEGATE_DEMO_PORT: "9443" }).api.port, 9443);
  assert.throws(() => demoPorts({ SITEGATE_DEMO_PORT: "x" }), /SITEGATE_DEMO_PORT=x is not a port/);
  assert.throws(() => demoPorts({ SITEGATE_DEMO_SINK_PORT: "8443" }), /SITEGATE_DEMO_SINK_PORT and SITEGATE_DEMO_PORT are both 8443/);
});

test("at 80x24 the screen shows the whole API key and every device's row with its state", () => {
  const addr = {
    api: "https://127.0.0.1:8443",
    statusPage: "https://127.0.0.1:8443/ui/",
    sink: "https://127.0.0.1:8444",
    simControl: "http://127.0.0.1:8502",
    config: "var/demo/config.yaml",
    password: "partner",
    apiKey: "demo-api-key",
  };
  const devices: DemoDevice[] = [
    {
      device_id: "battery",
      profile: "sunspec",
      identity: "SimEnergy SimStore 10K SN-0001",
      op_mode: 2,
      metrics: { power_w: 3000, state: 4, soc_pct: 49.91 },
    },
    { device_id: "grid", profile: "sunspec", identity: "SimEnergy SimMeter 3P SN-0003", op_mode: 0, metrics: { power_w: -1264 } },
    { device_id: "pv", profile: "sunspec", identity: "SimEnergy SimSolar 8K SN-0002", op_mode: 1, metrics: { power_w: 4030, state: 4 } },
    { device_id: "relay", profile: "relay-coils", identity: "", op_mode: 0, metrics: { state: 15 } },
    { device_id: "sdm", profile: "sdm630", identity: "77295082", op_mode: 0, metrics: { power_w: 1990.4, energy_import_wh: 12_345 } },
  ];
  const story = Array.from({ length: 30 }, (_, i) => `12:00:${String(i).padStart(2, "0")}  story line ${i}`);
  const lines = screen(addr, devices, story, 24, 80).split("\n");
  assert.ok(lines.length <= 24, `${lines.length} lines fit 24 rows`);
  for (const l of lines) assert.ok(l.length <= 80, `"${l}" fits 80 columns`);
  assert.ok(!lines.some((l) => l.endsWith("…")), "no header or table line is cut");
  assert.ok(
    lines.some((l) => l.includes("X-API-Key") && l.includes("demo-api-key")),
    "the whole API key",
  );
  for (const d of devices)
    assert.ok(
      lines.some((l) => l.startsWith(`${d.device_id} `)),
      `a row for ${d.device_id}`,
    );
  assert.ok(
    lines.some((l) => l.includes("coils 1:on 2:on 3:on 4:on")),
    "the relay's coils in words",
  );
  assert.equal(lines.at(-1), story.at(-1), "the newest story line last");
});
