// What the demo prints: kW with three significant digits, codes with their names, devices
// in device_id order whatever order they arrived in.
import { test } from "node:test";
import assert from "node:assert/strict";
import { coilsText, deviceRows, gridText, kw, opModeName, sunspecStateName } from "../support/demo-view.js";
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

test("op modes, SunSpec St and relay coils are named", () => {
  assert.deepEqual([0, 1, 2, 3, 4].map(opModeName), ["unknown", "local automatic", "remote dispatch", "standby", "fault"]);
  assert.equal(sunspecStateName(8), "standby");
  assert.equal(sunspecStateName(4), "producing (MPPT)");
  assert.equal(sunspecStateName(42), "St 42");
  assert.equal(coilsText(0b1011, 4), "1:on 2:on 3:off 4:on");
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
  assert.deepEqual(rows[0].slice(0, 5), ["battery", "3.00 kW", "producing (MPPT)", "remote dispatch", "SoC 49.9 %"]);
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
