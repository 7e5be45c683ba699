// One representation of what a device can do: the capability interfaces it implements.
// Device sync (B5) and dispatch derive the capability names from them (capabilitiesOf), so
// a profile whose `capabilities` list and actions disagree cannot make the wire promise
// what the device does not do, nor dispatch plan on it. A Modbus device offers an action
// only where what pairing found (its role rule's list) and its profile's actions agree.
import { test } from "node:test";
import { readdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import assert from "node:assert/strict";
import { Bus } from "../../src/modbus/bus.js";
import { idleTransport } from "../support/fake-devices.js";
import { DeviceDriver } from "../../src/modbus/device/driver.js";
import type { DriverPool } from "../../src/modbus/device/pool.js";
import { ProfileDevice, type ModbusReadings } from "../../src/modbus/device/profile-device.js";
import type { RegisteredDevice } from "../../src/modbus/device/types.js";
import { fixedProfileSchema, type Profile } from "../../src/profiles/schema.js";
import { builtinProfiles } from "../../src/profiles/registry.js";
import { capabilitiesOf, driveOf, type Device, type DeviceDescriptor } from "../../src/model/device.js";
import { deviceSyncView, syncedDevices } from "../../src/services/devices.js";
import { planned } from "../../src/dispatch/devices.js";
import { kindOf } from "../../src/dispatch/kinds/index.js";
import type { Capability, EventType } from "../../src/model/vocabulary.js";
import { silentLogger } from "../../src/log.js";

const readings: ModbusReadings = { latest: () => ({}), health: () => undefined, confirm: () => {}, setRemote: () => {} };

const step = (address: number) => [{ address, value: 1 }];

/** A ProfileDevice of `profile`, paired (its registry row) as `found` says. */
function profileDevice(profile: Record<string, unknown>, found: Pick<DeviceDescriptor, "role" | "capabilities">) {
  return deviceOf(fixedProfileSchema.parse({ kind: "fixed", points: [{ metric: "power_w", address: 0, type: "s16" }], ...profile }), found);
}

function deviceOf(p: Profile, found: Pick<DeviceDescriptor, "role" | "capabilities">) {
  const bus = new Bus({ kind: "tcp", host: "127.0.0.1", port: 1 }, silentLogger(), idleTransport);
  const driver = new DeviceDriver(bus, 1, p);
  const registered = {
    config: { device_id: "d1" },
    descriptor: { ...found, device_type: 0, max_power_w: 5000, profile: p.name, identity: {} },
    fully_configured: true,
    updated_at: "",
  } as unknown as RegisteredDevice;
  return {
    device: new ProfileDevice(registered, { driverFor: () => driver } as unknown as DriverPool, readings),
    close: () => bus.close(),
  };
}

const wire = (d: ProfileDevice) => deviceSyncView("site", syncedDevices({ list: () => [d] })).devices[0]!.capabilities;

test("capabilitiesOf: telemetry always, then what the interfaces give, in the wire's order", () => {
  const power = { refreshMs: 0, setPower: async () => {} };
  const none: Capability[] = ["telemetry"];
  assert.deepEqual(capabilitiesOf({}), none);
  assert.deepEqual(capabilitiesOf({ power }), ["telemetry", "charge", "discharge"]);
  assert.deepEqual(capabilitiesOf({ power: { ...power, directions: ["discharge"] } }), ["telemetry", "discharge"]);
  assert.deepEqual(capabilitiesOf({ curtail: { refreshMs: 0, setLimit: async () => {} } }), ["telemetry", "curtail"]);
  assert.deepEqual(capabilitiesOf({ switch: { switchOff: async () => {} } }), ["telemetry", "shed", "restore"]);
  assert.deepEqual(capabilitiesOf({ setpoint: { setback_c: 2, setBack: async () => {} } }), ["telemetry", "shed", "restore"]);
});

test("driveOf: each action through the one interface that carries it, with that interface's refresh; none for an action no interface carries", async () => {
  const writes: string[] = [];
  const d = {
    power: {
      refreshMs: 20_000,
      directions: ["charge"] as const,
      setPower: async (dir: string, w: number) => void writes.push(`${dir} ${w}`),
    },
    curtail: { refreshMs: 5_000, setLimit: async (pct: number) => void writes.push(`limit ${pct}`) },
    setpoint: { setback_c: 2, setBack: async (pre: unknown) => void writes.push(`setback from ${JSON.stringify(pre)}`) },
  };
  await driveOf(d, "charge")!.write({ watts: 1500 }, null);
  await driveOf(d, "curtail")!.write({ pct: 40 }, null);
  await driveOf(d, "shed")!.write({}, { setpoint_c: 21 });
  assert.deepEqual(writes, ["charge 1500", "limit 40", 'setback from {"setpoint_c":21}']);
  assert.deepEqual([driveOf(d, "charge")!.refreshMs, driveOf(d, "curtail")!.refreshMs, driveOf(d, "shed")!.refreshMs], [20_000, 5_000, 0]);
  assert.equal(driveOf(d, "discharge"), undefined, "its power takes charge only");
  assert.equal(driveOf(d, "release"), undefined);
  const both = { ...d, switch: { refreshMs: 60_000, switchOff: async () => void writes.push("off") } };
  await driveOf(both, "shed")!.write({}, null);
  assert.equal(writes.at(-1), "off", "a device with a switch sheds by switching off");
  assert.equal(driveOf(both, "shed")!.refreshMs, 60_000);
});

test("a profile that lists capabilities its actions lack: the wire and dispatch offer only what it writes", async () => {
  const r = profileDevice(
    {
      name: "says-more",
      role: "battery",
      capabilities: ["telemetry", "charge", "discharge", "shed", "restore"],
      actions: { discharge: step(100) },
    },
    { role: "battery", capabilities: ["telemetry", "charge", "discharge", "shed", "restore"] },
  );
  try {
    assert.equal(r.device.switch, undefined);
    assert.deepEqual(r.device.power?.directions, ["discharge"]);
    assert.deepEqual(wire(r.device), ["telemetry", "discharge"]);
    const [seen] = planned({ list: () => [r.device] });
    assert.equal(kindOf("charge").capable("charge", seen!), false, "not charged: its profile writes no charge");
    assert.equal(kindOf("discharge").capable("discharge", seen!), true);
  } finally {
    await r.close();
  }
});

test("a profile with actions its capability list lacks (one SunSpec profile, a PV inverter found): not offered, not planned", async () => {
  const r = profileDevice(
    {
      name: "both",
      role: "pv",
      capabilities: ["telemetry", "curtail"],
      actions: { charge: step(100), discharge: step(100), curtail: step(200) },
    },
    { role: "pv", capabilities: ["telemetry", "curtail"] },
  );
  try {
    assert.equal(r.device.power, undefined, "a PV inverter is not charged though its profile can write a battery");
    assert.ok(r.device.curtail);
    assert.deepEqual(wire(r.device), ["telemetry", "curtail"]);
    const [seen] = planned({ list: () => [r.device] });
    assert.equal(kindOf("charge").capable("charge", seen!), false);
    assert.equal(kindOf("pv_limit").capable("pv_limit", seen!), true);
  } finally {
    await r.close();
  }
});

test("every built-in profile: its devices offer exactly the capabilities it declares, so device sync's bytes are as before", async () => {
  const profiles = builtinProfiles();
  const checked: string[] = [];
  for (const name of profiles.names()) {
    const p = profiles.get(name);
    const found = p.kind === "fixed" ? [{ role: p.role, capabilities: p.capabilities }] : p.roles;
    for (const f of found) {
      const r = deviceOf(p, { role: f.role, capabilities: f.capabilities });
      try {
        assert.deepEqual(wire(r.device), f.capabilities, `${name} as ${f.role}`);
        checked.push(`${name}:${f.capabilities.join("+")}`);
      } finally {
        await r.close();
      }
    }
  }
  for (const c of ["relay-coils:telemetry+shed+restore", "sunspec:telemetry+curtail", "sungrow-sh:telemetry+charge+discharge"])
    assert.ok(checked.includes(c), `${c} in ${checked.join(" ")}`);
});

/** A device of `role` that implements only `parts`, while its descriptor lists every capability. */
function bare(
  id: string,
  role: DeviceDescriptor["role"],
  parts: Partial<Pick<Device, "power" | "curtail" | "switch" | "setpoint">>,
): Device {
  const all: Capability[] = ["telemetry", "charge", "discharge", "curtail", "shed", "restore"];
  return {
    id,
    info: () => ({ device_id: id, family: "test", address: id, fully_configured: true }),
    descriptor: () => ({ role, device_type: 0, capabilities: all, profile: "test", identity: {} }),
    latest: () => ({ power_w: 100 }),
    health: () => ({ online: true, last_ok_at: null, last_error: null, consecutive_failures: 0, op_mode: 1 }),
    ...parts,
    capture: async () => ({}),
    revert: async () => {},
    verify: async () => undefined,
    handBack: async () => {},
    holdsState: () => true,
    setRemote: () => {},
  } as Device;
}

test("a plan holds each Device itself, and its kinds decide from the interfaces it implements, not its descriptor's list", () => {
  const noop = async () => {};
  const devices = [
    bare("nothing", "battery", {}),
    bare("charger", "battery", { power: { refreshMs: 0, directions: ["charge"], setPower: noop } }),
    bare("pv", "pv", { curtail: { refreshMs: 0, setLimit: noop } }),
    bare("heater", "thermostat", { setpoint: { setback_c: 2, setBack: noop } }),
    bare("plug", "switch", { switch: { switchOff: noop } }),
  ];
  const seen = planned({ list: () => devices });
  assert.deepEqual(
    seen.map((p) => p.device),
    devices,
  );
  assert.ok(seen.every((p, i) => p.device === devices[i]));
  const can = (type: EventType) => seen.filter((p) => kindOf(type).capable(type, p)).map((p) => p.device.id);
  assert.deepEqual(can("charge"), ["charger"]);
  assert.deepEqual(can("discharge"), [], "its power takes charge only");
  assert.deepEqual(can("pv_limit"), ["pv"]);
  assert.deepEqual(can("shed"), ["heater", "plug"]);
  assert.deepEqual(can("restore"), ["heater", "plug"]);
  seen[0]!.metrics.power_w = 5;
  assert.equal(devices[0]!.latest().power_w, 100, "the plan's readings are its own copy");
});

const DISPATCH = resolve(fileURLToPath(import.meta.url), "../../../../src/dispatch");

test("dispatch never reads a list of capability names: the kinds decide from the interfaces a device implements", () => {
  const files = readdirSync(DISPATCH, { recursive: true, encoding: "utf8" }).filter((f) => f.endsWith(".ts"));
  assert.ok(files.length > 20 && files.includes(join("kinds", "shed.ts")), `read ${files.length} files from ${DISPATCH}`);
  const reads: string[] = [];
  for (const f of files)
    readFileSync(join(DISPATCH, f), "utf8")
      .split("\n")
      .forEach((line, i) => {
        const code = line.replace(/\/\*.*?\*\/|\/\/.*$|^\s*\*.*$/g, "");
        if (/\bcapabilities\b|\bcapabilitiesOf\b|\bCapability\b/.test(code)) reads.push(`${f}:${i + 1}: ${line.trim()}`);
      });
  assert.deepEqual(reads, []);
});
