// A transport family that exists only in this test: a battery, a switch and a thermostat
// whose state is a few fields in memory. It is registered through the same factory list
// and registry the daemon uses (parts/families.ts, devices/directory.ts), and a charge, a
// shed and a restore run through the real dispatcher, executor and ledger on an injected
// clock. Nothing in src/dispatch knows this family: that is the point.
import { test } from "node:test";
import assert from "node:assert/strict";
import { SiteDevices } from "../../src/devices/directory.js";
import type { DeviceFamily } from "../../src/devices/family.js";
import type {
  Device,
  DeviceDescriptor,
  DeviceHealth,
  DeviceInfo,
  Metrics,
  PowerControllable,
  PreState,
  Setpoint,
  Switchable,
} from "../../src/model/device.js";
import type { ActionName } from "../../src/model/vocabulary.js";
import { buildFamilies, type FamilyContext } from "../../src/parts/families.js";
import { Dispatcher, type ExecutionResponse } from "../../src/dispatch/dispatcher.js";
import { DISPATCH_MIGRATIONS } from "../../src/dispatch/store.js";
import { openDatabase, migrate } from "../../src/storage/db.js";
import { silentLogger } from "../../src/log.js";
import { FakeClock } from "../support/fake-clock.js";
import { drRequest, POLL, T0 } from "../support/dispatch-unit.js";
import { makeTmpDir } from "../support/tmp.js";

const settle = async () => {
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
};

/** What every device of the memory family shares: where it is, its health, the remote flag. */
abstract class MemoryDevice implements Device {
  remote = false;
  constructor(
    readonly id: string,
    private readonly desc: Omit<DeviceDescriptor, "profile" | "identity">,
    private readonly rated?: number,
  ) {}
  info(): DeviceInfo {
    return {
      device_id: this.id,
      family: "memory",
      address: `memory/${this.id}`,
      fully_configured: true,
      ...(this.rated ? { rated_power_w: this.rated } : {}),
    };
  }
  descriptor(): DeviceDescriptor {
    return { ...this.desc, profile: "memory", identity: {} };
  }
  health(): DeviceHealth {
    return { online: true, last_ok_at: null, last_error: null, consecutive_failures: 0, op_mode: this.remote ? 2 : 1 };
  }
  setRemote(remote: boolean): void {
    this.remote = remote;
  }
  abstract latest(): Metrics;
  abstract capture(action: ActionName, held?: PreState): Promise<PreState>;
  abstract revert(pre: PreState): Promise<void>;
  abstract verify(pre: PreState): Promise<string | undefined>;
}

class MemoryBattery extends MemoryDevice {
  state = { mode: "auto" as "auto" | "charge" | "discharge", watts: 0 };
  readonly power: PowerControllable = {
    refreshMs: 0,
    setPower: async (direction, watts) => {
      this.state = { mode: direction, watts: Math.round(watts) };
    },
  };
  constructor(id: string) {
    super(id, { role: "battery", device_type: 3, max_power_w: 5000, capabilities: ["telemetry", "charge", "discharge"] });
  }
  latest(): Metrics {
    return { soc_pct: 50, power_w: this.state.mode === "charge" ? -this.state.watts : this.state.watts };
  }
  async capture(_a: ActionName, held?: PreState): Promise<PreState> {
    return held ?? { ...this.state };
  }
  async revert(pre: PreState): Promise<void> {
    this.state = { ...(pre as MemoryBattery["state"]) };
  }
  async verify(pre: PreState): Promise<string | undefined> {
    return JSON.stringify(pre) === JSON.stringify(this.state) ? undefined : `reads ${JSON.stringify(this.state)}`;
  }
}

class MemorySwitch extends MemoryDevice {
  on = true;
  readonly switch: Switchable = { switchOff: async () => void (this.on = false) };
  constructor(id: string) {
    super(id, { role: "switch", device_type: 30, capabilities: ["telemetry", "shed", "restore"] }, 1000);
  }
  latest(): Metrics {
    return { state: this.on ? 1 : 0 };
  }
  async capture(_a: ActionName, held?: PreState): Promise<PreState> {
    return held ?? { on: this.on };
  }
  async revert(pre: PreState): Promise<void> {
    this.on = (pre as { on: boolean }).on;
  }
  async verify(pre: PreState): Promise<string | undefined> {
    return (pre as { on: boolean }).on === this.on ? undefined : "switch differs";
  }
}

class MemoryThermostat extends MemoryDevice {
  setpoint_c = 21;
  readonly setpoint: Setpoint = {
    setback_c: 3,
    setBack: async (pre) => void (this.setpoint_c = (pre as { c: number }).c - 3),
  };
  constructor(id: string) {
    super(id, { role: "thermostat", device_type: 31, capabilities: ["telemetry", "shed", "restore"] }, 1000);
  }
  latest(): Metrics {
    return { setpoint_c: this.setpoint_c };
  }
  async capture(_a: ActionName, held?: PreState): Promise<PreState> {
    return held ?? { c: this.setpoint_c };
  }
  async revert(pre: PreState): Promise<void> {
    this.setpoint_c = (pre as { c: number }).c;
  }
  async verify(pre: PreState): Promise<string | undefined> {
    return (pre as { c: number }).c === this.setpoint_c ? undefined : "setpoint differs";
  }
}

test("a transport family defined only in this test takes a charge, a shed and a restore through the real dispatcher, without any change to dispatch", async () => {
  const bat = new MemoryBattery("mem-bat");
  const sw = new MemorySwitch("mem-switch");
  const th = new MemoryThermostat("mem-tstat");
  const memory: DeviceFamily = { family: "memory", devices: () => [bat, sw, th] };
  // The same path the daemon's families take: a factory entry, then the registry.
  const devices = new SiteDevices(buildFamilies({} as FamilyContext, [() => memory]));
  assert.deepEqual(
    devices.list().map((d) => d.id),
    ["mem-bat", "mem-switch", "mem-tstat"],
  );

  const tmp = makeTmpDir();
  const db = openDatabase(tmp.dir);
  migrate(db, [DISPATCH_MIGRATIONS]);
  const clock = new FakeClock(T0);
  const responses: ExecutionResponse[] = [];
  const d = new Dispatcher({
    db: () => db,
    devices,
    clock,
    log: silentLogger(),
    pollIntervalMs: POLL,
    respond: (_s, b) => responses.push(b),
  });
  const ledgerPre = (id: string) => {
    const row = db.prepare("SELECT pre FROM dp_ledger WHERE device_id = ?").get(id) as { pre: string } | undefined;
    return row && JSON.parse(row.pre);
  };
  const poll = async (until: number) => {
    while (clock.now() < until) {
      clock.advance(POLL);
      d.observe({ ts: clock.now(), devices: devices.list().map((x) => ({ device_id: x.id, metrics: x.latest() })) });
      await settle();
    }
  };
  try {
    await d.start();
    const charge = drRequest([{ event_type: "charge", event_quantity: 3 }], { event_type: "charge", event_quantity: 3 });
    const shed = drRequest([{ event_quantity: 1.5, end_time: new Date(T0 + 600_000).toISOString() }], {
      event_type: "shed",
      event_quantity: 1.5,
    });
    const restore = drRequest([{ start_time: new Date(T0 + 30_000).toISOString(), end_time: new Date(T0 + 40_000).toISOString() }], {
      event_type: "restore",
      event_quantity: 0,
    });
    d.submit(charge);
    d.submit(shed);
    d.submit(restore);
    clock.advance(10_000);
    await settle();

    // charge: the battery's power capability; shed: the switch off, the thermostat set back.
    assert.deepEqual(bat.state, { mode: "charge", watts: 3000 });
    assert.equal(sw.on, false);
    assert.equal(th.setpoint_c, 18);
    assert.ok(bat.remote && sw.remote && th.remote, "driven devices are under remote dispatch");
    // The ledger holds each device's own pre-state, committed before the write.
    assert.deepEqual(ledgerPre("mem-bat"), { mode: "auto", watts: 0 });
    assert.deepEqual(ledgerPre("mem-switch"), { on: true });
    assert.deepEqual(ledgerPre("mem-tstat"), { c: 21 });

    // restore at T0+30 s ends the shed: both loads are put back from the ledger and read back.
    await poll(T0 + 41_000);
    assert.equal(sw.on, true);
    assert.equal(th.setpoint_c, 21);
    assert.equal(ledgerPre("mem-switch"), undefined);
    assert.equal(ledgerPre("mem-tstat"), undefined);
    const rb = responses.find((x) => x.event_id === restore.event_slots[0].event_id)!;
    assert.equal(rb.status, "completed", JSON.stringify(rb));
    assert.deepEqual(bat.state, { mode: "charge", watts: 3000 }, "the charge is no shed: the restore leaves it");

    // The charge ends at T0+70 s: the battery goes back to its pre-event state.
    await poll(T0 + 71_000);
    assert.deepEqual(bat.state, { mode: "auto", watts: 0 });
    assert.equal(ledgerPre("mem-bat"), undefined);
    assert.equal(bat.remote || sw.remote || th.remote, false);
    const cb = responses.find((x) => x.event_id === charge.event_slots[0].event_id)!;
    assert.equal(cb.status, "completed", JSON.stringify(cb));
  } finally {
    await d.stop();
    db.close();
    tmp.cleanup();
  }
});
