// Device roles as data: every built-in profile names roles, the one table gives the wire
// codes device sync publishes, a profile's op-mode map decides device_op_mode, only a
// relay's coil bit mask says which coils are on, one rule picks the grid meter, and a
// descriptor stored before roles were recorded gets its role from its wire code.
import { test } from "node:test";
import assert from "node:assert/strict";
import { builtinProfiles } from "../../src/profiles/registry.js";
import { DeviceDriver } from "../../src/modbus/device/driver.js";
import { gridMeter, type MeterCandidate } from "../../src/devices/grid-meter.js";
import { ROLES, declareWireTypes, roleOfWire, typed, wireLabel, wireType } from "../../src/model/roles.js";
// Each family declares its codes when its module loads (the daemon loads them all).
import "../../src/zigbee/wire-types.js";
import "../../src/gpio/wire-types.js";
import type { Bus } from "../../src/modbus/bus.js";
import { DeviceRegistry, REGISTRY_MIGRATIONS } from "../../src/modbus/device/registry.js";
import { StoragePart } from "../../src/storage/part.js";
import { silentLogger } from "../../src/log.js";
import { withTmpDir } from "../support/tmp.js";

const bus = { endpoint: { kind: "tcp", host: "127.0.0.1", port: 1 }, setDeviceDelay() {} } as unknown as Bus;
const driver = (profile: string) => new DeviceDriver(bus, 1, builtinProfiles().get(profile));

test("every built-in profile declares roles; the wire codes come from the one table", () => {
  const roles = builtinProfiles()
    .names()
    .flatMap((n) => {
      const p = builtinProfiles().get(n);
      return p.kind === "fixed" ? [p.role] : p.roles.map((r) => r.role);
    });
  for (const r of roles) assert.ok(ROLES.includes(r), r);
  const relay = builtinProfiles().get("relay-coils");
  assert.equal(relay.kind === "fixed" && relay.role, "switch");
  assert.deepEqual(
    ["battery", "pv", "meter", "switch", "unknown"].map((r) => wireType(r as never, "modbus")),
    [10, 11, 12, 14, 0],
  );
  assert.deepEqual(
    [typed("switch", "zigbee"), typed("thermostat", "zigbee"), typed("switch", "gpio"), typed("input", "gpio")].map((t) => t.device_type),
    [30, 31, 41, 40],
  );
  for (const code of [0, 10, 11, 12, 14, 30, 31, 40, 41]) {
    const role = roleOfWire(code);
    assert.equal(
      wireType(role, code >= 40 ? "gpio" : code >= 30 ? "zigbee" : "modbus"),
      code,
      `code ${code} round-trips through role ${role}`,
    );
  }
  assert.equal(roleOfWire(77), "unknown");
  assert.deepEqual([wireLabel(10), wireLabel(41), wireLabel(null)], ["battery inverter", "GPIO output", "device"]);
});

test("a family registers its own wire codes: a new family's code round-trips, another family's code is refused", () => {
  declareWireTypes("thermometer", [{ code: 90, role: "unknown", label: "thermometer" }]);
  declareWireTypes("thermometer", [{ code: 90, role: "unknown", label: "thermometer" }]); // the same again: loaded twice
  assert.equal(wireLabel(90), "thermometer");
  assert.equal(wireType("switch", "thermometer"), 0, "a role the family declares no code for");
  assert.throws(
    () => declareWireTypes("thermometer", [{ code: 30, role: "switch", label: "clash" }]),
    /device_type 30 is declared by zigbee as switch/,
  );
  assert.equal(wireLabel(30), "Zigbee switch", "nothing changes");
});

test("device_op_mode follows the profile's op-mode map; a relay's state is its coils, never an op mode", () => {
  const inverter = driver("sunspec");
  assert.deepEqual(
    [4, 5, 1, 8, 7, 99].map((st) => inverter.opMode({ state: st })),
    [1, 1, 3, 3, 4, 0],
  );
  assert.equal(inverter.opMode({ power_w: 100 }), 0, "no reading of the state: unknown");
  assert.equal(inverter.coilsOn({ state: 4 }), undefined, "an inverter's St is no coil mask");
  const relay = driver("relay-coils");
  assert.equal(relay.opMode({ state: 7 }), 0, "coils 1-3 closed is not a fault");
  assert.equal(relay.coilsOn({ state: 12 }), 12);
  assert.equal(driver("sdm630").opMode({ power_w: 1 }), 0);
});

test("the grid meter: fully configured, online, with a power reading; a 'grid' id first, then by id", () => {
  const m = (device_id: string, over: Partial<MeterCandidate> = {}): MeterCandidate => ({
    device_id,
    role: "meter",
    fully_configured: true,
    online: true,
    power_w: 100,
    ...over,
  });
  const pick = (devs: MeterCandidate[]) => gridMeter(devs, (d) => d)?.device_id;
  assert.equal(pick([m("b"), m("a")]), "a");
  assert.equal(pick([m("a"), m("z-grid")]), "z-grid");
  assert.equal(pick([m("grid", { online: false }), m("b")]), "b");
  assert.equal(pick([m("grid", { fully_configured: false }), m("b")]), "b");
  assert.equal(pick([m("grid", { power_w: undefined }), m("b")]), "b");
  assert.equal(pick([m("grid", { role: "pv" })]), undefined);
});

test("a descriptor stored with only its wire device_type (an earlier release) reads back with its role", async () => {
  await withTmpDir(async (dir) => {
    const storage = new StoragePart(dir, [REGISTRY_MIGRATIONS], silentLogger());
    storage.start();
    try {
      const config = {
        device_id: "bat",
        device_type: "modbus",
        device_integration: "org/sunspec",
        mb_type: 2,
        mb_device_type: 3,
        mb_ip: "127.0.0.1",
        mb_port: 502,
        mb_slave_id: 1,
      };
      const old = {
        device_type: 10,
        max_power_w: 5000,
        capabilities: ["telemetry", "charge", "discharge"],
        profile: "sunspec",
        identity: {},
      };
      storage.db
        .prepare("INSERT INTO dv_device (device_id, config, descriptor, fully_configured, updated_at) VALUES (?, ?, ?, 1, ?)")
        .run("bat", JSON.stringify(config), JSON.stringify(old), new Date().toISOString());
      const registry = new DeviceRegistry(storage);
      registry.start();
      assert.deepEqual(registry.get("bat")?.descriptor, { ...old, role: "battery" });
    } finally {
      storage.stop();
    }
  });
});
