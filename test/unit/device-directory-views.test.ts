// Device sync, the status page and /healthz's list read devices through the one device
// model (`DeviceDirectory`), whatever their family: a device class defined here only is
// listed beside the others. And the one registry lists the Modbus family's devices with
// what the poll read of them.
import { test } from "node:test";
import assert from "node:assert/strict";
import type {
  Device,
  DeviceDescriptor,
  DeviceDirectory,
  DeviceHealth,
  DeviceInfo,
  Metrics,
  PowerControllable,
  Switchable,
} from "../../src/model/device.js";
import { deviceSyncView, syncState, syncedDevices } from "../../src/services/devices.js";
import { devices as statusDevices, overview, type UiDeps } from "../../src/ui/views.js";
import { SiteDevices } from "../../src/devices/directory.js";
import { builtinProfiles } from "../../src/profiles/registry.js";
import { ModbusFamily } from "../../src/modbus/device/family.js";
import type { RegisteredDevice } from "../../src/modbus/device/types.js";

const ONLINE: DeviceHealth = {
  online: true,
  last_ok_at: "2026-01-01T00:00:00.000Z",
  last_error: null,
  consecutive_failures: 0,
  op_mode: 1,
};

/** A family of the test only. */
class TestDevice implements Device {
  constructor(
    readonly id: string,
    private readonly opts: { info?: Partial<DeviceInfo>; descriptor: DeviceDescriptor | null; health?: DeviceHealth; latest?: Metrics },
  ) {}
  /** What it offers follows its descriptor's role, as a family would build it. */
  get power(): PowerControllable | undefined {
    return this.opts.descriptor?.role === "battery" ? { refreshMs: 0, directions: ["charge"], setPower: async () => {} } : undefined;
  }
  get switch(): Switchable | undefined {
    return this.opts.descriptor?.role === "switch" ? { switchOff: async () => {} } : undefined;
  }
  info(): DeviceInfo {
    return { device_id: this.id, family: "test", address: `test://${this.id}`, fully_configured: true, ...this.opts.info };
  }
  descriptor(): DeviceDescriptor | null {
    return this.opts.descriptor;
  }
  health(): DeviceHealth {
    return this.opts.health ?? ONLINE;
  }
  latest(): Metrics {
    return this.opts.latest ?? {};
  }
  capture = async () => ({});
  revert = async () => {};
  verify = async () => undefined;
  setRemote(): void {}
}

const battery: DeviceDescriptor = {
  role: "battery",
  device_type: 1,
  max_power_w: 5000.4,
  capabilities: ["telemetry", "charge"],
  profile: "t",
  identity: {},
};
const relay: DeviceDescriptor = { role: "switch", device_type: 99, capabilities: ["telemetry", "shed"], profile: "t", identity: {} };
const meter: DeviceDescriptor = { role: "meter", device_type: 3, capabilities: ["telemetry"], profile: "t", identity: {} };

function directory(list: Device[]): DeviceDirectory {
  return { list: () => list, get: (id) => list.find((d) => d.id === id), version: 1 };
}

test("device sync lists every fully configured device with a descriptor, whatever its family, in the B5 answer's bytes (its capabilities from the interfaces it implements)", () => {
  const down: DeviceHealth = { online: false, last_ok_at: null, last_error: "no answer", consecutive_failures: 3, op_mode: 1 };
  const dir = directory([
    new TestDevice("relay-1", { descriptor: relay, info: { device_name: "Boiler", rated_power_w: [1000, 500.6] } }),
    new TestDevice("bat-2", { descriptor: battery, health: { ...ONLINE, op_mode: 2 } }),
    new TestDevice("bat-10", { descriptor: battery, health: down }),
    new TestDevice("unpaired", { descriptor: null }),
    new TestDevice("half", { descriptor: relay, info: { fully_configured: false } }),
    new TestDevice("new", { descriptor: meter, health: { ...down, last_error: null, consecutive_failures: 0 } }),
  ]);
  const listed = syncedDevices(dir);
  assert.deepEqual(
    listed.map((d) => d.device.id),
    ["relay-1", "bat-2", "bat-10", "new"],
  );
  assert.equal(syncState(listed), "1@1500.6,2@5000.4,1u@5000.4,1");
  assert.equal(
    JSON.stringify(deviceSyncView("site-001", listed)),
    '{"site_id":"site-001","devices":[' +
      '{"device_id":"bat-10","device_type":1,"device_max_power":5000,"device_op_mode":4,"capabilities":["telemetry"]},' +
      '{"device_id":"bat-2","device_type":1,"device_max_power":5000,"device_op_mode":2,"capabilities":["telemetry","charge"]},' +
      '{"device_id":"new","device_type":3,"capabilities":["telemetry"]},' +
      '{"device_id":"relay-1","device_type":99,"device_max_power":1501,"name":"Boiler","capabilities":["telemetry","shed","restore"]}]}',
  );
});

test("the status page shows any family's devices from info(), health() and latest(), and its overview counts them all", () => {
  const dir = directory([
    new TestDevice("pv", { descriptor: { ...meter, role: "pv", device_type: 2 }, latest: { power_w: 3000 } }),
    new TestDevice("grid-meter", { descriptor: meter, latest: { power_w: -1000 } }),
    new TestDevice("plug", { descriptor: relay, info: { device_name: "Washer" }, health: { ...ONLINE, online: false } }),
  ]);
  const deps = { devices: dir, config: { site_id: "s" }, profiles: builtinProfiles() } as unknown as UiDeps;
  const rows = statusDevices(deps);
  assert.deepEqual(
    rows.map((r) => [r.device_id, r.name, r.family, r.address, r.online, r.op_mode_name]),
    [
      ["grid-meter", "grid-meter", "test", "test://grid-meter", true, "local automatic"],
      ["plug", "Washer", "test", "test://plug", false, "local automatic"],
      ["pv", "pv", "test", "test://pv", true, "local automatic"],
    ],
  );
  const o = overview(deps);
  assert.deepEqual([o.pv_w, o.grid_w, o.grid_meter, o.load_w, o.devices], [3000, -1000, "grid-meter", 2000, { configured: 3, online: 2 }]);
});

test("the one registry: Modbus devices from the persisted registry (their mb_* fields as an address), then other families; health and readings from the poll", async () => {
  const reg = (id: string, c: Record<string, unknown>, full = true): RegisteredDevice =>
    ({
      config: { device_id: id, device_integration: "org-1/sunspec", ...c },
      descriptor: full ? meter : null,
      fully_configured: full,
      updated_at: "",
    }) as unknown as RegisteredDevice;
  const rows = [
    reg("tcp-1", { mb_type: 2, mb_ip: "10.0.0.5", mb_port: 502, mb_slave_id: 3, device_name: "Grid" }),
    reg("rtu-1", { mb_type: 1, mb_rtu_no: 0, mb_baud: 9600, mb_slave_id: 7, rated_power_w: [100, 200] }, false),
  ];
  const registry = { version: 4, list: () => rows, get: (id: string) => rows.find((r) => r.config.device_id === id) };
  const pool = {
    driverFor: (): never => {
      throw new Error("no driver in this test");
    },
  };
  const remote: string[] = [];
  const readings = {
    health: (id: string) => (id === "tcp-1" ? ONLINE : undefined),
    latest: (id: string) => (id === "tcp-1" ? { power_w: 5 } : undefined),
    confirm: () => {},
    setRemote: (id: string) => void remote.push(id),
  };
  const plug = new TestDevice("plug", { descriptor: relay });
  const dir = new SiteDevices([new ModbusFamily(registry, pool, readings), { family: "test", devices: () => [plug] }]);

  assert.deepEqual(
    dir.list().map((d) => [d.id, d.info().family, d.info().address, d.info().fully_configured]),
    [
      ["tcp-1", "modbus", "tcp://10.0.0.5:502 unit 3", true],
      ["rtu-1", "modbus", "RTU port 0 unit 7", false],
      ["plug", "test", "test://plug", true],
    ],
  );
  assert.equal(dir.get("tcp-1")?.info().device_name, "Grid");
  assert.deepEqual(dir.get("rtu-1")?.info().rated_power_w, [100, 200]);
  assert.equal(dir.get("rtu-1")?.descriptor(), null);
  assert.deepEqual(dir.get("tcp-1")?.latest(), { power_w: 5 });
  assert.deepEqual(dir.get("rtu-1")?.latest(), {}, "no reading yet");
  assert.deepEqual(dir.get("rtu-1")?.health(), { online: false, last_ok_at: null, last_error: null, consecutive_failures: 0, op_mode: 0 });
  assert.equal(dir.get("nope"), undefined);
  dir.get("tcp-1")?.setRemote(true);
  assert.deepEqual(remote, ["tcp-1"]);

  // The version follows the persisted registry's.
  const v = dir.version;
  registry.version = 5;
  assert.equal(dir.version, v + 1);
});
