// Issue 39, B4 "Closed loop": no release is given up, a device that cannot be released
// blocks only itself, and a cancellation is final once its receipt is sent. Devices of a
// family that exists only in this test (as in device-family.test.ts), in memory, driven
// through the real dispatcher, executor and ledger on an injected clock. Every device here
// can be made to acknowledge a write-back and not act on it, the way a relay with a stuck
// contact or a Sungrow that ignores its EMS mode does.
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
  Switchable,
} from "../../src/model/device.js";
import type { ActionName } from "../../src/model/vocabulary.js";
import { buildFamilies, type FamilyContext } from "../../src/parts/families.js";
import { Dispatcher, type ExecutionResponse } from "../../src/dispatch/dispatcher.js";
import { DISPATCH_MIGRATIONS } from "../../src/dispatch/store.js";
import { openDatabase, migrate, type Db } from "../../src/storage/db.js";
import { createLogger } from "../../src/log.js";
import { askRelease, releaseRequest } from "../../src/dispatch/release-requests.js";
import { ReleaseBackoff } from "../../src/dispatch/release-backoff.js";
import { FakeClock } from "../support/fake-clock.js";
import { drRequest, POLL, T0 } from "../support/dispatch-unit.js";
import { makeTmpDir } from "../support/tmp.js";

const settle = async () => {
  for (let i = 0; i < 30; i++) await new Promise((r) => setImmediate(r));
};

abstract class MemoryDevice implements Device {
  remote = false;
  /** Acknowledges a write-back (restore) and does not act on it. */
  ignoreRestore = false;
  /** Refuses a write-back (an exception answer). */
  refuseRestore = false;
  restores = 0;
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
  async revert(pre: PreState): Promise<void> {
    this.restores++;
    if (this.refuseRestore) throw new Error("exception 4 (slave device failure)");
    if (!this.ignoreRestore) this.put(pre);
  }
  async verify(pre: PreState): Promise<string | undefined> {
    return JSON.stringify(pre) === JSON.stringify(this.state()) ? undefined : `reads ${JSON.stringify(this.state())}`;
  }
  async capture(_a: ActionName, held?: PreState): Promise<PreState> {
    return held ?? this.state();
  }
  abstract latest(): Metrics;
  abstract state(): unknown;
  abstract put(pre: PreState): void;
}

/** A relay: on or off; every change logged with the time, and whether a receipt had been sent by then. */
class Relay extends MemoryDevice {
  on = true;
  changes: Array<{ on: boolean; afterReceipt: boolean }> = [];
  receiptSent = false;
  /** While set, switchOff waits for it before it switches (a write in flight). */
  gate: Promise<void> | undefined;
  readonly switch: Switchable = {
    switchOff: async () => {
      if (this.gate) await this.gate;
      this.set(false);
    },
  };
  constructor(id: string) {
    super(id, { role: "switch", device_type: 30, capabilities: ["telemetry", "shed", "restore"] }, 1000);
  }
  private set(on: boolean): void {
    if (on !== this.on) this.changes.push({ on, afterReceipt: this.receiptSent });
    this.on = on;
  }
  latest(): Metrics {
    return { state: this.on ? 1 : 0 };
  }
  state(): unknown {
    return { on: this.on };
  }
  put(pre: PreState): void {
    this.set((pre as { on: boolean }).on);
  }
}

/** A hybrid battery with an EMS mode, a forced command and a power (Sungrow-like). */
class Hybrid extends MemoryDevice {
  st = { mode: "self_consumption", command: "stop", watts: 0 };
  readonly power: PowerControllable = {
    refreshMs: 0,
    setPower: async (direction, watts) => {
      this.st = { mode: "forced", command: direction, watts: Math.round(watts) };
    },
  };
  constructor(id: string) {
    super(id, { role: "battery", device_type: 10, max_power_w: 5000, capabilities: ["telemetry", "charge", "discharge"] });
  }
  latest(): Metrics {
    const w = this.st.mode === "forced" ? this.st.watts : 0;
    return { soc_pct: 50, power_w: this.st.command === "charge" ? -w : w };
  }
  state(): unknown {
    return { ...this.st };
  }
  put(pre: PreState): void {
    this.st = { ...(pre as Hybrid["st"]) };
  }
}

/** The grid meter: a base load plus every relay that is on. */
class Meter extends MemoryDevice {
  constructor(
    id: string,
    private readonly loads: () => Relay[],
  ) {
    super(id, { role: "meter", device_type: 12, capabilities: ["telemetry"] });
  }
  latest(): Metrics {
    return { power_w: 3000 + this.loads().filter((r) => r.on).length * 1000 };
  }
  state(): unknown {
    return {};
  }
  put(): void {}
}

function rig(devs: MemoryDevice[], logLines: string[] = []) {
  const log = createLogger({
    level: "info",
    pretty: false,
    journal: false,
    destination: { write: (l: string) => logLines.push(l) } as unknown as NodeJS.WritableStream,
  });
  const memory: DeviceFamily = { family: "memory", devices: () => devs };
  const devices = new SiteDevices(buildFamilies({} as FamilyContext, [() => memory]));
  const tmp = makeTmpDir();
  const db: Db = openDatabase(tmp.dir);
  migrate(db, [DISPATCH_MIGRATIONS]);
  const clock = new FakeClock(T0);
  const responses: ExecutionResponse[] = [];
  const d = new Dispatcher({
    db: () => db,
    devices,
    clock,
    log,
    pollIntervalMs: POLL,
    respond: (_s, b) => responses.push(b),
  });
  const poll = async (until: number) => {
    while (clock.now() < until) {
      clock.advance(POLL);
      d.observe({ ts: clock.now(), devices: devices.list().map((x) => ({ device_id: x.id, metrics: x.latest() })) });
      await settle();
    }
  };
  const ledger = (id: string) =>
    db.prepare("SELECT * FROM dp_ledger WHERE device_id = ?").get(id) as { pre: string; unreleased?: string | null } | undefined;
  const gauge = () => d.metrics().find((m) => m.name === "sitegate_devices_unreleased")?.values[0]?.value;
  const response = (id: string) => responses.find((x) => x.event_id === id);
  return {
    d,
    db,
    clock,
    poll,
    ledger,
    gauge,
    response,
    async close() {
      await d.stop();
      db.close();
      tmp.cleanup();
    },
  };
}

test("finding 1: a relay that ignores its release stays in the ledger, is retried with backoff, and is released once its fault clears", async () => {
  const sw = new Relay("relay");
  const r = rig([sw]);
  try {
    await r.d.start();
    const shed = drRequest([{}], { event_type: "shed", event_quantity: 0.5 });
    r.d.submit(shed);
    await r.poll(T0 + 11_000);
    assert.equal(sw.on, false, "shed");
    sw.ignoreRestore = true;
    await r.poll(T0 + 90_000); // the shed ended at T0+70 s
    assert.equal(sw.on, false);
    assert.ok(r.ledger("relay"), "the row stays while the relay does not read back its release");
    assert.match(r.ledger("relay")!.unreleased ?? "", /reads \{"on":false\}/);
    assert.equal(r.gauge(), 1, "sitegate_devices_unreleased counts it");
    assert.deepEqual(
      r.d.health().warnings.map((w) => w.code),
      ["device_unreleased"],
    );
    assert.ok(sw.remote, "still under remote dispatch (device sync: op mode 2)");
    // Attempts at +0, +1, +3, +7, +15 s after the end: backoff 1 s doubling (not one per poll).
    assert.ok(sw.restores >= 4 && sw.restores <= 6, `restores ${sw.restores}`);
    const cleared = r.clock.now();
    sw.ignoreRestore = false;
    // The next attempt comes within the current backoff (at most 60 s), plus a poll.
    await r.poll(cleared + 60_000 + 2 * POLL);
    assert.equal(sw.on, true, "released once the fault cleared");
    assert.equal(r.ledger("relay"), undefined);
    assert.equal(r.gauge(), 0);
    assert.deepEqual(r.d.health().warnings, []);
    assert.equal(sw.remote, false);
  } finally {
    await r.close();
  }
});

test("finding 1: a hybrid left in forced discharge keeps its row and op mode 2; the next charge skips it, then takes the undisturbed pre-state as its before", async () => {
  const bat = new Hybrid("sungrow");
  const r = rig([bat]);
  try {
    await r.d.start();
    const undisturbed = { mode: "self_consumption", command: "stop", watts: 0 };
    r.d.submit(drRequest([{}], { event_type: "discharge", event_quantity: 2.5 }));
    await r.poll(T0 + 11_000);
    assert.deepEqual(bat.st, { mode: "forced", command: "discharge", watts: 2500 });
    bat.ignoreRestore = true;
    await r.poll(T0 + 75_000); // the discharge ended at T0+70 s; its release is ignored
    assert.deepEqual(bat.st, { mode: "forced", command: "discharge", watts: 2500 });
    assert.deepEqual(JSON.parse(r.ledger("sungrow")!.pre), undisturbed, "the row keeps the undisturbed pre-state");
    assert.equal(bat.health().op_mode, 2, "device sync shows it under remote dispatch");

    // A charge from T0+80 s to T0+200 s: the battery cannot be released, so the charge skips it.
    const charge = drRequest([{ start_time: new Date(T0 + 80_000).toISOString(), end_time: new Date(T0 + 200_000).toISOString() }], {
      event_type: "charge",
      event_quantity: 2,
    });
    const probe = drRequest([{ start_time: new Date(T0 + 80_000).toISOString(), end_time: new Date(T0 + 90_000).toISOString() }], {
      event_type: "charge",
      event_quantity: 1,
    });
    r.d.submit(charge);
    r.d.submit(probe);
    await r.poll(T0 + 91_000);
    assert.deepEqual(bat.st, { mode: "forced", command: "discharge", watts: 2500 }, "nothing new written to it");
    const pb = r.response(probe.event_slots[0].event_id)!;
    const dev = pb.details.devices as Array<{ device_id: string; status: string; error?: string }>;
    assert.equal(dev[0]?.status, "skipped", JSON.stringify(pb));
    assert.match(dev[0]?.error ?? "", /^not released: /);

    bat.ignoreRestore = false; // the fault clears: the retry puts it back, then the charge takes it
    await r.poll(T0 + 160_000);
    assert.deepEqual(bat.st, { mode: "forced", command: "charge", watts: 2000 });
    assert.deepEqual(JSON.parse(r.ledger("sungrow")!.pre), undisturbed, "the charge's before: never the forced state");
    await r.poll(T0 + 205_000);
    assert.deepEqual(bat.st, undisturbed, "the charge's end puts back self-consumption, not forced discharge");
    assert.equal(r.ledger("sungrow"), undefined);
  } finally {
    await r.close();
  }
});

test("finding 7: a device that cannot be released blocks only itself: a metered shed 16 min later keeps its baseline and skips it", async () => {
  const stuck = new Relay("a-stuck");
  const other = new Relay("b-other");
  const meter = new Meter("grid-meter", () => [stuck, other]);
  const r = rig([stuck, other, meter]);
  try {
    await r.d.start();
    // A first shed takes the first relay (shed order: device_id), whose release is then ignored for good.
    r.d.submit(drRequest([{}], { event_type: "shed", event_quantity: 0.5 }));
    await r.poll(T0 + 20_000);
    assert.equal(stuck.on, false);
    assert.equal(other.on, true);
    stuck.refuseRestore = true;
    const start = T0 + 70_000 + 16 * 60_000;
    const second = drRequest([{ start_time: new Date(start).toISOString(), end_time: new Date(start + 120_000).toISOString() }], {
      event_type: "shed",
      event_quantity: 0.9,
    });
    r.d.submit(second);
    await r.poll(start + 125_000);
    assert.equal(stuck.on, false, "still not released");
    const sb = r.response(second.event_slots[0].event_id)!;
    assert.equal(sb.details.measured, true, `the shed found a quiet minute for its metered baseline: ${JSON.stringify(sb)}`);
    const devs = sb.details.devices as Array<{ device_id: string; status: string; error?: string }>;
    const a = devs.find((x) => x.device_id === "a-stuck");
    assert.equal(a?.status, "skipped", JSON.stringify(sb));
    assert.match(a?.error ?? "", /^not released: /);
    assert.equal(other.on, true, "the other relay was shed and put back");
    assert.ok(other.changes.some((c) => !c.on));
  } finally {
    await r.close();
  }
});

for (const path of ["https", "fleet"] as const)
  test(`finding 9 (${path}): a cancellation during a write in flight: the receipt waits for it and its release; nothing switches after the receipt`, async () => {
    const sw = new Relay("relay");
    const r = rig([sw]);
    let open!: () => void;
    sw.gate = new Promise<void>((res) => (open = res));
    try {
      await r.d.start();
      const shed = drRequest([{}], { event_type: "shed", event_quantity: 0.5 });
      r.d.submit(shed);
      r.clock.advance(10_000); // the shed starts: its write to the relay is now in flight
      await settle();
      assert.equal(sw.on, true, "the write has not gone through yet");
      let receipt: unknown;
      const cancelled = { ...shed, event_slots: [{ ...shed.event_slots[0], cancelled: true }] };
      // The HTTPS route's group commit, or the fleet's `dr` command.
      void (path === "https" ? r.d.submitBatched(cancelled) : Promise.resolve(r.d.submitFinal(cancelled))).then((x) => {
        receipt = x;
        sw.receiptSent = true;
      });
      await settle();
      assert.equal(receipt, undefined, "no receipt while the write is in flight");
      open(); // the relay switches off now, after the cancellation was taken but before its receipt
      await settle();
      assert.deepEqual(receipt, [{ event_id: shed.event_slots[0].event_id, status: "cancelled" }]);
      assert.equal(sw.on, true, "released before the receipt");
      await r.poll(T0 + 80_000);
      assert.deepEqual(
        sw.changes.filter((c) => c.afterReceipt),
        [],
        "nothing that event started is switched after the receipt",
      );
      assert.equal(sw.on, true);
    } finally {
      open();
      await r.close();
    }
  });

test("a cancellation's receipt waits at most 2 s for a write that never ends", async () => {
  const sw = new Relay("relay");
  const r = rig([sw]);
  let open!: () => void;
  sw.gate = new Promise<void>((res) => (open = res)); // does not answer within the test's 2 s
  try {
    await r.d.start();
    const shed = drRequest([{}], { event_type: "shed", event_quantity: 0.5 });
    r.d.submit(shed);
    r.clock.advance(10_000);
    await settle();
    let receipt: unknown;
    void r.d.submitBatched({ ...shed, event_slots: [{ ...shed.event_slots[0], cancelled: true }] }).then((x) => (receipt = x));
    await settle();
    r.clock.advance(1999);
    await settle();
    assert.equal(receipt, undefined);
    r.clock.advance(1);
    await settle();
    assert.ok(receipt, "answered after the 2 s bound");
  } finally {
    open();
    await r.close();
  }
});

test("`sitegate devices release ID` through the database: the running dispatcher retries at once at its next snapshot, whatever the backoff; --forget drops the row with a log line", async () => {
  const sw = new Relay("relay");
  const lines: string[] = [];
  const r = rig([sw], lines);
  try {
    await r.d.start();
    r.d.submit(drRequest([{}], { event_type: "shed", event_quantity: 0.5 }));
    await r.poll(T0 + 11_000);
    sw.ignoreRestore = true;
    await r.poll(T0 + 110_000); // the shed ended at T0+70 s; retries every 1, 2, 4, ... 32 s: the next one is over 30 s away
    const before = sw.restores;
    sw.ignoreRestore = false;
    const q = askRelease(r.db, "relay", "release", r.clock.now());
    await r.poll(r.clock.now() + POLL); // one snapshot
    assert.equal(releaseRequest(r.db, q)?.answer, "released");
    assert.equal(sw.restores, before + 1, "one attempt, at once");
    assert.equal(sw.on, true);
    assert.equal(r.ledger("relay"), undefined);

    // --forget: a second shed leaves the relay unreleased; the operator switched it on by hand.
    const shed2 = drRequest([{ start_time: new Date(T0 + 120_000).toISOString(), end_time: new Date(T0 + 130_000).toISOString() }], {
      event_type: "shed",
      event_quantity: 0.5,
    });
    r.d.submit(shed2);
    await r.poll(T0 + 125_000);
    sw.ignoreRestore = true;
    await r.poll(T0 + 135_000);
    assert.ok(r.ledger("relay")?.unreleased);
    const f = askRelease(r.db, "relay", "forget", r.clock.now());
    await r.poll(r.clock.now() + POLL);
    assert.equal(releaseRequest(r.db, f)?.answer, "forgotten");
    assert.equal(r.ledger("relay"), undefined);
    assert.equal(r.gauge(), 0);
    assert.equal(sw.remote, false);
    const logged = lines
      .map((l) => JSON.parse(l) as { msg: string; device_id?: string })
      .find((l) => /dropped by the operator/.test(l.msg));
    assert.equal(logged?.device_id, "relay");
    const restores = sw.restores;
    await r.poll(T0 + 200_000);
    assert.equal(sw.restores, restores, "nothing retries a forgotten row");
  } finally {
    await r.close();
  }
});

test("the release backoff: 1 s after the first failure, doubling, at most 60 s; a device being released is not waited for", () => {
  const b = new ReleaseBackoff();
  let now = 0;
  const gaps: number[] = [];
  for (let i = 0; i < 9; i++) {
    const at = b.failed("d", now);
    gaps.push(at - now);
    assert.equal(b.ready("d", at - 1), false);
    assert.equal(b.ready("d", at), true);
    now = at;
  }
  assert.deepEqual(gaps, [1000, 2000, 4000, 8000, 16_000, 32_000, 60_000, 60_000, 60_000]);
  assert.equal(b.next(new Set()), now, "the last retry time");
  assert.equal(b.next(new Set(["d"])), Infinity, "no timer for a release under way");
  b.clear("d");
  assert.equal(b.ready("d", 0), true);
});
