// zigbee2mqtt's bridge/devices entries and state messages as sitegate reads them.
import { test } from "node:test";
import assert from "node:assert/strict";
import { parseBridgeDevices, parseOnline, stateMetrics } from "../../src/zigbee/exposes.js";

const DEVICES = [
  { ieee_address: "0x00124b0000000001", friendly_name: "Coordinator", type: "Coordinator", definition: null },
  {
    ieee_address: "0x00158D0001A2B3C4",
    friendly_name: "washer-plug",
    type: "Router",
    definition: {
      model: "SP 120",
      vendor: "innr",
      exposes: [
        { type: "switch", features: [{ type: "binary", name: "state", property: "state", value_on: "ON", value_off: "OFF", access: 7 }] },
        { type: "numeric", name: "power", property: "power", unit: "W", access: 5 },
      ],
    },
  },
  {
    ieee_address: "0x00158d0001a2b3c5",
    friendly_name: "living-trv",
    type: "EndDevice",
    definition: {
      model: "TRV",
      vendor: "x",
      exposes: [
        {
          type: "climate",
          features: [
            {
              type: "numeric",
              name: "occupied_heating_setpoint",
              property: "occupied_heating_setpoint",
              value_min: 5,
              value_max: 30,
              value_step: 0.5,
              access: 7,
            },
          ],
        },
      ],
    },
  },
];

test("bridge/devices: end devices with their on/off, setpoint and metering, the coordinator left out", () => {
  const list = parseBridgeDevices(DEVICES);
  assert.deepEqual(
    list.map((d) => d.friendly_name),
    ["washer-plug", "living-trv"],
  );
  assert.equal(list[0].ieee_address, "0x00158d0001a2b3c4");
  assert.deepEqual(list[0].onOff, { property: "state", on: "ON", off: "OFF" });
  assert.equal(list[0].metering, true);
  assert.deepEqual(list[1].setpoint, { property: "occupied_heating_setpoint", min: 5, max: 30, step: 0.5 });
  assert.equal(list[1].metering, false);
});

test("state messages become metrics; availability in both payload forms", () => {
  const [plug, trv] = parseBridgeDevices(DEVICES);
  assert.deepEqual(stateMetrics(plug, { state: "OFF", power: 0, energy: 0.42, voltage: 230, current: 0, linkquality: 162 }), {
    state: 0,
    power_w: 0,
    energy_import_wh: 420,
    voltage_v: 230,
    current_a: 0,
  });
  assert.deepEqual(stateMetrics(trv, { local_temperature: 20.8, occupied_heating_setpoint: 21, running_state: "heat" }), {
    state: 1,
    setpoint_c: 21,
    temperature_c: 20.8,
  });
  assert.equal(parseOnline('{"state":"online"}'), true);
  assert.equal(parseOnline("offline"), false);
  assert.equal(parseOnline("{}"), undefined);
});
