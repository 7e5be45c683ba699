// One device_id, one device (DESIGN B5): across every family, in the config file, the
// configure endpoint and the fleet's configure command (both through configureService). A
// clash is a 400 naming both devices; a new id outside ^[A-Za-z0-9._-]{1,64}$ is a 400; an
// id the site already has is kept, with a warning.
import { test } from "node:test";
import assert from "node:assert/strict";
import { configureService, type ConfigureDeps } from "../../src/services/devices.js";
import { statusOf } from "../../src/services/errors.js";
import { configWarnings, parseConfig } from "../../src/load-config.js";
import { builtinProfiles } from "../../src/profiles/registry.js";
import { silentLogger } from "../../src/log.js";
import type { Device } from "../../src/model/device.js";
import { SiteDevices } from "../../src/devices/directory.js";
import { configDeclaredDevices } from "../../src/config/device-ids.js";
import { deviceConfigSchema, type DeviceConfig } from "../../src/modbus/config-schema.js";
import { validateDevices } from "../../src/modbus/config-rules.js";
import { testConfig, testConfigInput, TEST_ORG } from "../support/config.js";
import { tcpDevice } from "../support/gateway.js";
import { problems, refusal } from "../support/issues.js";

const ZIGBEE = { url: "mqtt://127.0.0.1:1883", devices: [{ device_id: "plug-1", friendly_name: "washer-plug", device_type: 30 as const }] };
const fakeDevice = (id: string, family: string) =>
  ({ id, info: () => ({ family }), latest: () => ({ power_w: 1 }), health: () => ({ online: true }) }) as unknown as Device;

function deps(held: Device[] = [fakeDevice("plug-1", "zigbee")]) {
  const configured: string[][] = [];
  const warnings: unknown[] = [];
  const d: ConfigureDeps = {
    config: testConfig("/tmp/sitegate-ids", { zigbee: ZIGBEE }),
    connector: {
      family: "modbus",
      entrySchema: deviceConfigSchema,
      check: (entries: DeviceConfig[]) => validateDevices(entries, { organizationId: TEST_ORG, rtuPorts: {}, profiles: builtinProfiles() }),
      configure: async (devices: Array<{ device_id: string }>) => {
        configured.push(devices.map((x) => x.device_id));
        return devices.map((x) => ({ device_id: x.device_id, status: "accepted" as const, message: "ok" }));
      },
    } as unknown as ConfigureDeps["connector"],
    devices: { list: () => held },
    log: { ...silentLogger(), warn: (...a: unknown[]) => warnings.push(a) } as unknown as ConfigureDeps["log"],
  };
  return { d, configured, warnings };
}

const body = (...ids: string[]) => ({
  devices: ids.map((id, i) => ({ ...tcpDevice(id, 1502, 1 + i), device_integration: `${TEST_ORG}/sunspec` })),
});

test("configure refuses a Modbus device under the id of a Zigbee plug with a 400 naming both, and configures nothing", async () => {
  const { d, configured } = deps();
  const e = await refusal(configureService(body("plug-1"), d));
  assert.equal(statusOf(e.code), 400);
  assert.equal(e.details.length, 1, JSON.stringify(e.details));
  assert.equal(e.details[0]?.path, "devices[0].device_id");
  assert.match(
    e.details[0]?.message ?? "",
    /duplicate device_id "plug-1": devices\[0\] \(modbus\) and the config file's zigbee\.devices\[0\] \(zigbee\) both name it/,
  );
  assert.deepEqual(configured, [], "nothing configured");
  // A family's device the config file does not declare (the directory lists it) clashes alike.
  const gpio = deps([fakeDevice("boiler", "gpio")]);
  const g = await refusal(configureService(body("boiler"), gpio.d));
  assert.match(g.details[0]?.message ?? "", /devices\[0\] \(modbus\) and the gpio device \(gpio\) both name it/);
});

test("configure takes a Modbus device again under its own id, and refuses one id twice in a request", async () => {
  const { d, configured } = deps([fakeDevice("plug-1", "zigbee"), fakeDevice("bat-1", "modbus")]);
  const ok = await configureService(body("bat-1"), d);
  assert.equal(ok.devices[0]?.status, "accepted");
  const e = await refusal(configureService(body("pv-1", "pv-1"), d));
  assert.match(e.details[0]?.message ?? "", /devices\[1\] \(modbus\) and devices\[0\] \(modbus\) both name it/);
  assert.deepEqual(configured, [["bat-1"]]);
});

test("a new device_id with NUL, newline, /, +, # or a space, or over 64 characters, is a 400; nothing is configured", async () => {
  const { d, configured } = deps();
  for (const id of ["a\u0000b", "a\nb", "a/b", "a+b", "a#b", "a b", "x".repeat(65), "pläg"]) {
    const e = await refusal(configureService(body(id), d));
    assert.equal(statusOf(e.code), 400);
    assert.match(e.details[0]?.message ?? "", /must be 1 to 64 characters of A-Z a-z 0-9 \. _ -/, JSON.stringify(id));
    assert.ok(!(e.details[0]?.message ?? "").includes("\n"), "shown escaped");
  }
  await configureService(body("Bat_1.a-b", "x".repeat(64)), d);
  assert.deepEqual(configured, [["Bat_1.a-b", "x".repeat(64)]]);
});

test("a stored device whose id a new device could not take is kept: configured again, with a warning", async () => {
  const { d, configured, warnings } = deps([fakeDevice("old id/1", "modbus")]);
  await configureService(body("old id/1"), d);
  assert.deepEqual(configured, [["old id/1"]]);
  assert.equal(warnings.length, 1);
});

test("the config file: a clash across families names both; an id outside the charset is kept with a warning", () => {
  const input = testConfigInput("/tmp/x", {
    devices: [{ ...tcpDevice("plug-1", 1502, 1), device_integration: `${TEST_ORG}/sunspec` }] as never,
    zigbee: ZIGBEE,
  });
  const list = problems(() => parseConfig(input, "/"));
  assert.deepEqual(list, [
    {
      path: "zigbee.devices[0].device_id",
      message: `duplicate device_id "plug-1": zigbee.devices[0] (zigbee) and devices[0] (modbus) both name it; one device_id names one device`,
    },
  ]);
  const cfg = testConfig("/tmp/x", { zigbee: { ...ZIGBEE, devices: [{ ...ZIGBEE.devices[0]!, device_id: "washer plug" }] } });
  assert.deepEqual(configWarnings(cfg), [
    `zigbee.devices[0]: device_id "washer plug" is kept, but a new device could not take it: must be 1 to 64 characters of A-Z a-z 0-9 . _ - (no space, NUL, newline, / + #)`,
  ]);
});

test("a device_id two families already hold (stored before the rule) is listed once, the first family's, and reported once", () => {
  const pv = fakeDevice("plug-1", "modbus");
  const plug = fakeDevice("plug-1", "zigbee");
  const other = fakeDevice("trv-1", "zigbee");
  const clashes: unknown[] = [];
  const dir = new SiteDevices(
    [
      {
        family: "modbus",
        devices: () => [pv],
        // A reading of an id that is not one of its devices is not the family's to give.
        read: () => [{ source: "bus", readings: ["plug-1", "ghost"].map((device_id) => ({ device_id, metrics: { power_w: 1 } })) }],
      },
      { family: "zigbee", devices: () => [plug, other] },
    ],
    (id, families) => clashes.push([id, families]),
  );
  assert.deepEqual(dir.list(), [pv, other], "device sync and dispatch see one device under plug-1");
  const ids = dir.read(0).flatMap((p) => (p.readings instanceof Promise ? [] : p.readings.map((r) => r.device_id)));
  assert.deepEqual(
    ids,
    ["plug-1", "trv-1"],
    "each tick takes plug-1's readings from its first family only, and no reading of a device the family does not list",
  );
  assert.equal(dir.get("plug-1"), pv);
  dir.list();
  assert.deepEqual(clashes, [["plug-1", ["modbus", "zigbee"]]], "reported once");
});

test("the config file's devices are those each family's block declares: its family and config path, Modbus, Zigbee, GPIO", () => {
  const cfg = testConfig("/tmp/x", {
    devices: [{ ...tcpDevice("meter-1", 1502, 3), device_integration: `${TEST_ORG}/sunspec` }] as never,
    zigbee: ZIGBEE,
    gpio: { backend: "sim", chip: "http://127.0.0.1:1", lines: [{ device_id: "boiler", line: 27, device_type: 41 }] },
  });
  assert.deepEqual(configDeclaredDevices(cfg), [
    { device_id: "meter-1", family: "modbus", where: "devices[0]" },
    { device_id: "plug-1", family: "zigbee", where: "zigbee.devices[0]" },
    { device_id: "boiler", family: "gpio", where: "gpio.lines[0]" },
  ]);
});
