// What the Zigbee side takes from its broker, as pure functions: which friendly names may
// go into a topic, how a state message is bounded and its readings checked, what a forged
// device list can and cannot set, and the log budget that turns a flood into a counter.
import { test } from "node:test";
import assert from "node:assert/strict";
import { zigbeeNameProblem } from "../../src/zigbee/config-schema.js";
import {
  MAX_DEVICES,
  MAX_DEVICES_BYTES,
  MAX_DEVICES_NODES,
  MAX_STATE_BYTES,
  MAX_STATE_KEYS,
  readDeviceList,
  readState,
} from "../../src/zigbee/state.js";
import { parseBridgeDevices } from "../../src/zigbee/exposes.js";
import { LogBudget } from "../../src/util/log-budget.js";
import { parseConfig } from "../../src/load-config.js";
import { testConfigInput } from "../support/config.js";
import { problems } from "../support/issues.js";

test("friendly names: no wildcard, NUL, control character or empty level, nothing below bridge/, no set/get/availability level", () => {
  for (const ok of ["washer-plug", "Living Room/TRV", "küche", "plug 1", "a/b/c", "bridges", "x".repeat(256)])
    assert.equal(zigbeeNameProblem(ok), undefined, ok);
  const bad: Array<[string, RegExp]> = [
    ["+", /wildcard/],
    ["#", /wildcard/],
    ["plug/+", /wildcard/],
    ["plug\u0000x", /NUL/],
    ["plug\nx", /control/],
    ["bridge/request/device/remove", /bridge\//],
    ["bridge", /bridge\//],
    ["/plug", /empty topic level/],
    ["plug/", /empty topic level/],
    ["a//b", /empty topic level/],
    ["", /empty/],
    ["plug/set", /"set"/],
    ["plug/get/x", /"get"/],
    ["plug/availability", /"availability"/],
    ["\ud800plug", /Unicode/],
    ["x".repeat(257), /longer than 256/],
  ];
  for (const [name, why] of bad) assert.match(zigbeeNameProblem(name) ?? "(accepted)", why, JSON.stringify(name));
});

test("the config refuses the same names and a base_topic with a wildcard or an empty level", () => {
  const zigbee = (friendly_name: string, base_topic = "zigbee2mqtt") =>
    problems(() =>
      parseConfig(
        testConfigInput("/tmp/x", {
          zigbee: { url: "mqtt://127.0.0.1:1883", base_topic, devices: [{ device_id: "p", friendly_name, device_type: 30 }] },
        } as never),
        "/",
      ),
    );
  const p = zigbee("bridge/request/device/remove");
  assert.equal(p[0].path, "zigbee.devices[0].friendly_name");
  assert.match(p[0].message, /friendly_name is below bridge\//);
  assert.match(zigbee("+")[0].message, /wildcard/);
  assert.equal(zigbee("ok", "z2m/")[0].path, "zigbee.base_topic");
  assert.match(zigbee("ok", "z2m/#")[0].message, /base_topic contains an MQTT wildcard/);
});

test("state messages: bounded in bytes and keys before anything is merged; only used readings kept, each checked", () => {
  const read = (v: unknown) => readState(Buffer.from(typeof v === "string" ? v : JSON.stringify(v)));
  const big = read({ power: 5, pad: "x".repeat(MAX_STATE_BYTES) });
  assert.equal(big.ok === false && big.reason, "too_large");
  const keys = read(Object.fromEntries(Array.from({ length: MAX_STATE_KEYS + 1 }, (_, i) => [`k${i}`, i])));
  assert.equal(keys.ok === false && keys.reason, "too_many_keys");
  assert.equal(read("{").ok === false && (read("{") as { reason: string }).reason, "not_json");
  assert.equal((read([1, 2]) as { reason: string }).reason, "not_object");
  assert.equal((read("null") as { reason: string }).reason, "not_object");

  const r = read({
    state: "ON",
    power: 1234.5,
    energy: 12.5,
    voltage: 231,
    current: 5.3,
    local_temperature: 21.5,
    occupied_heating_setpoint: 21,
    linkquality: 80,
    __proto__: { power: 1 },
  });
  assert.ok(r.ok);
  assert.deepEqual(r.values, {
    state: "ON",
    power: 1234.5,
    energy: 12.5,
    voltage: 231,
    current: 5.3,
    local_temperature: 21.5,
    occupied_heating_setpoint: 21,
  });
  assert.deepEqual(r.refused, []);

  // Forged readings: wrong type, not finite (JSON has none, but 1e400 parses as Infinity), out of range.
  const forged = read(
    '{"power": 1e400, "energy": -5, "voltage": "230", "local_temperature": 500, "state": "' + "X".repeat(40) + '", "current": 2}',
  );
  assert.ok(forged.ok);
  assert.deepEqual(forged.values, { current: 2 });
  assert.deepEqual(forged.refused.sort(), ["energy", "local_temperature", "power", "state", "voltage"]);
  assert.deepEqual((read({ power: 3_000_000 }) as { refused: string[] }).refused, ["power"]);
});

test("a forged device list: bad IEEE addresses skipped, setpoint ranges and strings bounded, deep nesting not followed", () => {
  let deep: unknown = { type: "binary", property: "state", value_on: "ON", value_off: "OFF" };
  for (let i = 0; i < 10_000; i++) deep = { type: "composite", features: [deep] };
  const list = parseBridgeDevices([
    { ieee_address: "0x00158d0001a2b3c4; rm -rf", friendly_name: "a", definition: {} },
    { ieee_address: 42, friendly_name: "b" },
    {
      ieee_address: "0x00158d0001a2b3c5",
      friendly_name: "trv",
      definition: {
        model: "M".repeat(1000),
        vendor: "v\u0000",
        exposes: [
          { type: "numeric", property: "occupied_heating_setpoint", value_min: -1e9, value_max: 1e9, value_step: 0 },
          { type: "binary", property: "state", value_on: "X".repeat(100), value_off: "OFF" },
          deep,
        ],
      },
    },
  ]);
  assert.equal(list.length, 1);
  const d = list[0];
  assert.equal(d.model, undefined, "a 1000-character model is not taken");
  assert.equal(d.vendor, undefined, "a vendor with a control character is not taken");
  assert.deepEqual(d.setpoint, { property: "occupied_heating_setpoint", min: 5, max: 30, step: 0.5 });
  assert.equal(d.onOff, undefined, "an on value of 100 characters is not taken; the one 10,000 levels down is not reached");
});

test("the log budget: the first lines of a window written, the rest counted and reported with the next line", () => {
  let now = 0;
  const b = new LogBudget(3, 60_000, () => now);
  assert.deepEqual(
    Array.from({ length: 5 }, () => b.take()),
    [0, 0, 0, null, null],
  );
  now = 59_999;
  assert.equal(b.take(), null);
  now = 60_000;
  assert.equal(b.take(), 3, "three held back since the last line");
  assert.equal(b.take(), 0);
});

test("readDeviceList: refused by size, by devices and by objects before it is parsed; commas and brackets inside strings do not count", () => {
  const dev = (i: number) => ({ ieee_address: `0x${i.toString(16).padStart(16, "0")}`, friendly_name: `a, [b] {c} \\" ${i}` });
  const list = (n: number) => Buffer.from(JSON.stringify(Array.from({ length: n }, (_, i) => dev(i))));
  const ok = readDeviceList(list(MAX_DEVICES));
  assert.ok(ok.ok && ok.list.length === MAX_DEVICES);
  assert.deepEqual(readDeviceList(list(MAX_DEVICES + 1)), { ok: false, reason: "too_many_devices", detail: `over ${MAX_DEVICES} devices` });
  const big = readDeviceList(Buffer.alloc(MAX_DEVICES_BYTES + 1, 0x20));
  assert.equal(big.ok ? "" : big.reason, "too_large");
  const nested = Buffer.from(JSON.stringify([{ exposes: Array.from({ length: MAX_DEVICES_NODES }, () => ({})) }]));
  assert.equal(nested.length < MAX_DEVICES_BYTES, true);
  const n = readDeviceList(nested);
  assert.equal(n.ok ? "" : n.reason, "too_many_devices");
  for (const bad of ["{}", "x", "", "[1,", " [ ]"]) {
    const v = readDeviceList(Buffer.from(bad));
    if (bad === " [ ]") assert.ok(v.ok && v.list.length === 0);
    else assert.equal(v.ok ? "" : v.reason, "bad_list", bad);
  }
});
