// The device ledger with config-declared devices (Zigbee, GPIO): their pre-state is their
// own ({on}, {setpoint_c}); a row an earlier release wrote holds the register form those
// devices had then (coil 0 on/off, holding 0 the heating setpoint in 0.1 °C), which their
// families read through the Modbus family's reader, and a restart with such a row must
// still put the device back and read it back. The ledger never looks inside a pre-state:
// the device says whether it holds anything.
import { test } from "node:test";
import assert from "node:assert/strict";
import { LocalDevice, type LocalRole } from "../../src/devices/local.js";
import type { DeviceDescriptor, DeviceHealth, Metrics, PreState } from "../../src/model/device.js";
import { declaredFromRegisters } from "../../src/modbus/device/pre-state.js";
import { SiteDevices } from "../../src/devices/directory.js";
import { Ledger } from "../../src/dispatch/ledger.js";
import { DISPATCH_MIGRATIONS } from "../../src/dispatch/store.js";
import { openDatabase, migrate } from "../../src/storage/db.js";
import { withTmpDir } from "../support/tmp.js";

/** A declared switch or thermostat whose state is a field; its transport is this class. */
class Declared extends LocalDevice {
  protected readonly family = "test";
  on = false;
  heat_c = 18;
  writes: string[] = [];
  /** Back to its own control, when a test gives it one. */
  handBack?: () => Promise<void>;
  constructor(
    id: string,
    readonly role: LocalRole,
  ) {
    super({ device_id: id, setback_c: 2 });
  }
  descriptor(): DeviceDescriptor {
    return { role: this.role, device_type: 0, capabilities: ["telemetry", "shed", "restore"], profile: "test", identity: {} };
  }
  address(): string {
    return `test/${this.id}`;
  }
  latest(): Metrics {
    return {};
  }
  protected reported(): DeviceHealth {
    return { online: true, last_ok_at: null, last_error: null, consecutive_failures: 0, op_mode: 1 };
  }
  override async readOn(): Promise<boolean> {
    return this.on;
  }
  override async setOn(on: boolean): Promise<void> {
    this.writes.push(`on=${on}`);
    this.on = on;
  }
  override async readSetpoint(): Promise<number> {
    return this.heat_c;
  }
  override async setSetpoint(c: number): Promise<void> {
    this.writes.push(`setpoint=${c}`);
    this.heat_c = c;
  }
}

/** As the Zigbee and GPIO families have it: a row of an earlier release is read in the register form. */
class DeclaredSinceRegisters extends Declared {
  protected override earlierPre(pre: PreState) {
    return declaredFromRegisters(pre);
  }
}

function rig(dir: string, devs: Declared[]) {
  const db = openDatabase(dir);
  migrate(db, [DISPATCH_MIGRATIONS]);
  const put = (id: string, pre: unknown) =>
    db
      .prepare("INSERT INTO dp_ledger (device_id, holders, actions, pre, created_at, updated_at) VALUES (?, ?, ?, ?, 1, 1)")
      .run(id, JSON.stringify(["e-old"]), JSON.stringify(["shed"]), JSON.stringify(pre));
  const ledger = () => new Ledger(db, new SiteDevices([{ family: "test", devices: () => devs }]));
  return { db, put, ledger };
}

test("a ledger row an earlier release wrote in the register form (coil 0, holding 0 in 0.1 °C) still restores and reads back", async () => {
  await withTmpDir(async (dir) => {
    const plug = new DeclaredSinceRegisters("plug", "switch");
    const trv = new DeclaredSinceRegisters("trv", "thermostat");
    const r = rig(dir, [plug, trv]);
    // What the previous release stored before a kill -9: the plug was on, the setpoint 21.5 °C.
    r.put("plug", [{ table: "coil", address: 0, words: [], coils: [true] }]);
    r.put("trv", [{ table: "holding", address: 0, words: [215], coils: [] }]);
    const ledger = r.ledger();
    assert.deepEqual(await ledger.release("plug"), { verified: true });
    assert.deepEqual(await ledger.release("trv"), { verified: true });
    assert.equal(plug.on, true);
    assert.equal(trv.heat_c, 21.5);
    assert.equal(ledger.size, 0);
    r.db.close();
  });
});

test("a declared device's own pre-state: captured before the write, the setback taken from it (never twice), put back and read back", async () => {
  await withTmpDir(async (dir) => {
    const plug = new Declared("plug", "switch");
    const trv = new Declared("trv", "thermostat");
    plug.on = true;
    trv.heat_c = 21;
    const r = rig(dir, [plug, trv]);
    const ledger = r.ledger();
    await ledger.hold("plug", ["e1"], { action: "shed" }, 1);
    await ledger.hold("trv", ["e1"], { action: "shed" }, 1);
    await ledger.hold("trv", ["e1"], { action: "shed" }, 2); // a retry: from the held 21 °C, not from 19
    assert.deepEqual(ledger.get("plug")!.pre, { on: true });
    assert.deepEqual(ledger.get("trv")!.pre, { setpoint_c: 21 });
    assert.deepEqual([plug.on, trv.heat_c], [false, 19]);
    assert.deepEqual(trv.writes, ["setpoint=19", "setpoint=19"]);
    // A row held over an old-form row keeps what it held, in the device's own form now.
    r.put("old", [{ table: "holding", address: 0, words: [200], coils: [] }]);
    const old = new DeclaredSinceRegisters("old", "thermostat");
    const again = rig(dir, [old]);
    old.heat_c = 17;
    const l2 = again.ledger();
    await l2.hold("old", ["e2"], { action: "shed" }, 3);
    assert.deepEqual(l2.get("old")!.pre, { setpoint_c: 20 });
    assert.equal(old.heat_c, 18, "set back from the 20 °C held before the earlier event, not from 17 °C");
    assert.deepEqual(await ledger.release("plug"), { verified: true });
    assert.deepEqual(await ledger.release("trv"), { verified: true });
    assert.deepEqual([plug.on, trv.heat_c], [true, 21]);
    r.db.close();
    again.db.close();
  });
});

test("a family that never wrote the register form finds nothing in such a row: the ledger hands the device back to its own control", async () => {
  await withTmpDir(async (dir) => {
    const plug = new Declared("plug", "switch");
    const released: string[] = [];
    plug.handBack = async () => void released.push("plug");
    const r = rig(dir, [plug]);
    r.put("plug", [{ table: "coil", address: 0, words: [], coils: [true] }]);
    const ledger = r.ledger();
    assert.equal(plug.holdsState(ledger.get("plug")!.pre), false);
    assert.deepEqual(await ledger.release("plug"), { verified: true });
    assert.deepEqual([plug.writes, released], [[], ["plug"]], "nothing written back; released instead");
    assert.equal(ledger.size, 0);
    r.db.close();
  });
});

/** A device whose own pre-state is a list of tokens: an empty list is still a state (its outputs were all off). */
class Tokens extends Declared {
  restored: PreState[] = [];
  override holdsState(pre: PreState): boolean {
    return Array.isArray(pre);
  }
  override async revert(pre: PreState): Promise<void> {
    this.restored.push(pre);
  }
  override async verify(): Promise<string | undefined> {
    return undefined;
  }
}

test("the ledger does not read the shape of a pre-state: an empty list the device says holds its state is written back", async () => {
  await withTmpDir(async (dir) => {
    const dev = new Tokens("tokens", "switch");
    let released = 0;
    dev.handBack = async () => void released++;
    const r = rig(dir, [dev]);
    r.put("tokens", []);
    const ledger = r.ledger();
    assert.deepEqual(await ledger.release("tokens"), { verified: true });
    assert.deepEqual([dev.restored, released], [[[]], 0], "restored from the held state, not released");
    r.db.close();
  });
});
