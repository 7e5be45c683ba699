// A recording device family for dispatch unit tests (pure logic on the injected clock):
// batteries, relays and PV inverters as small register maps behind the one device model.
// Each capability resolves to raw writes like a profile would; reads and writes go to the
// map, and the pre-event state is the Modbus family's (the raw cells an action touches),
// so the device ledger's capture, release and read-back run for real against it.
import type { Planned } from "../../src/dispatch/allocate.js";
import type { Role } from "../../src/model/roles.js";
import type { ActionParams, RawWrite } from "../../src/modbus/device/raw-write.js";
import { asRawWrites, capturePre, verifyPre } from "../../src/modbus/device/pre-state.js";
import { capabilitiesOf, type Device, type DeviceDirectory, type Metrics, type PreState } from "../../src/model/device.js";
import { pctOf } from "../../src/model/power.js";
import type { ActionName } from "../../src/model/vocabulary.js";
import { FakeClock } from "./fake-clock.js";
import { planned as plannedOf } from "../../src/dispatch/devices.js";
import { SitegateError } from "../../src/errors.js";
import type { Transport } from "../../src/modbus/transport.js";

/** Battery mode register values. */
const MODES: Record<string, number> = { release: 0, charge: 1, discharge: 2 };
const MODE_NAMES = ["release", "charge", "discharge"] as const;

export interface FakeWrite {
  at: number;
  id: string;
  action: string;
  pct?: number;
  coils?: boolean[];
}

/** A fake device as a test describes it (tests change its metrics and flags in place; its Device reads them). */
export interface FakeSpec {
  device_id: string;
  role: Role;
  max_power_w?: number;
  fully_configured: boolean;
  online: boolean;
  metrics: Record<string, number>;
  /** A relay's closed coils as a bit mask (coil 0 = bit 0): what its switch's outputsOn() reads. */
  coils_on?: number;
  rated_power_w?: number | readonly number[];
  shed_priority?: number;
}

export class FakeDevices {
  writes: FakeWrite[] = [];
  remote = new Set<string>();
  regs = new Map<string, Map<string, number>>();
  /** Devices whose reads fail (to test "no pre-state, no write"). */
  unreadable = new Set<string>();
  /** Devices that acknowledge every write and change nothing (hw-sim's ignore_writes). */
  ignoreWrites = new Set<string>();
  /** Confirmation reads (power after a setpoint write), in order. */
  confirms: Array<{ at: number; id: string }> = [];
  /** What a device's power point reads now; by default no device has one (nothing is read). */
  power?: (id: string) => number | undefined;

  constructor(
    public list: FakeSpec[],
    private readonly clock: FakeClock,
  ) {}

  private readonly made = new Map<string, Device>();

  /** The devices as dispatch sees them (the registry's read side). */
  readonly directory: Pick<DeviceDirectory, "list" | "get"> = {
    list: () => this.list.map((d) => this.device(d.device_id)),
    get: (id) => (this.list.some((d) => d.device_id === id) ? this.device(id) : undefined),
  };

  private device(id: string): Device {
    let dev = this.made.get(id);
    if (!dev) this.made.set(id, (dev = fakeDevice(this, id)));
    return dev;
  }

  /** The dispatch view of a device (tests change its metrics and flags in place). */
  view(id: string): FakeSpec {
    return this.dev(id);
  }

  private dev(id: string): FakeSpec {
    const d = this.list.find((x) => x.device_id === id);
    if (!d) throw new Error(`no device ${id}`);
    return d;
  }

  private map(id: string): Map<string, number> {
    let m = this.regs.get(id);
    if (!m) {
      m = new Map();
      const d = this.dev(id);
      if (d.role === "switch") for (let i = 0; i < 4; i++) m.set(`coil:${i}`, 1);
      if (d.role === "pv") m.set("holding:210", 1); // connected
      this.regs.set(id, m);
    }
    return m;
  }

  /** Coil states of a relay. */
  coils(id: string): boolean[] {
    const m = this.map(id);
    return [0, 1, 2, 3].map((i) => m.get(`coil:${i}`) === 1);
  }

  setCoils(id: string, on: boolean[]): void {
    const m = this.map(id);
    on.forEach((c, i) => m.set(`coil:${i}`, c ? 1 : 0));
    this.dev(id).coils_on = on.reduce((s, c, i) => s + (c ? 2 ** i : 0), 0);
  }

  reg(id: string, table: "holding" | "coil", address: number): number {
    return this.map(id).get(`${table}:${address}`) ?? 0;
  }

  async plan(id: string, action: ActionName, params: ActionParams): Promise<RawWrite[]> {
    const d = this.dev(id);
    const h = (address: number, words: number[]): RawWrite => ({ table: "holding", address, words, coils: [] });
    if (d.role === "battery" && action in MODES) return [h(100, [MODES[action], params.pct ?? 0])];
    if (d.role === "switch" && (action === "shed" || action === "restore" || action === "release"))
      return [{ table: "coil", address: 0, words: [], coils: new Array(4).fill(action !== "shed") }];
    if (d.role === "pv" && action === "curtail") return [h(200, [1, params.pct ?? 0])];
    if (d.role === "pv" && action === "shed") return [h(210, [0])];
    if (d.role === "pv" && action === "release") return [h(200, [0]), h(210, [1])];
    throw new Error(`device ${id} has no ${action} action`);
  }

  async read(id: string, table: "holding" | "coil", address: number, count: number): Promise<number[]> {
    if (this.unreadable.has(id)) throw new Error("device does not answer");
    return Array.from({ length: count }, (_, i) => this.reg(id, table, address + i));
  }

  async write(id: string, writes: readonly RawWrite[]): Promise<void> {
    const d = this.dev(id);
    if (d.metrics.fail) throw new Error("device refused");
    if (this.ignoreWrites.has(id)) return;
    const m = this.map(id);
    for (const w of writes) {
      if (w.table === "coil") {
        w.coils.forEach((c, i) => m.set(`coil:${w.address + i}`, c ? 1 : 0));
        this.writes.push({ at: this.clock.now(), id, action: w.coils.every((c) => !c) ? "shed" : "coils", coils: [...w.coils] });
        d.coils_on = this.coils(id).reduce((s, c, i) => s + (c ? 2 ** i : 0), 0);
        continue;
      }
      w.words.forEach((v, i) => m.set(`holding:${w.address + i}`, v));
      if (d.role === "battery" && w.address === 100) {
        const action = MODE_NAMES[w.words[0]] ?? "release";
        this.writes.push(
          action === "release" ? { at: this.clock.now(), id, action } : { at: this.clock.now(), id, action, pct: w.words[1] },
        );
      } else if (d.role === "pv" && w.address === 200) {
        this.writes.push(
          w.words[0] === 1
            ? { at: this.clock.now(), id, action: "curtail", pct: w.words[1] }
            : { at: this.clock.now(), id, action: "release" },
        );
      } else this.writes.push({ at: this.clock.now(), id, action: `holding:${w.address}=${w.words.join(",")}` });
    }
  }

  async confirm(id: string): Promise<Record<string, number>> {
    this.confirms.push({ at: this.clock.now(), id });
    const w = this.power?.(id);
    if (w === undefined) return {};
    this.dev(id).metrics.power_w = w; // the latest values take it, as the poller's do
    return { power_w: w };
  }

  setRemote(id: string, on: boolean): void {
    if (on) this.remote.add(id);
    else this.remote.delete(id);
  }
}

/** A fake device: its capabilities by role, each an action planned and written on the register map. */
function fakeDevice(f: FakeDevices, id: string): Device {
  const d = () => f.view(id);
  const act = async (action: ActionName, params: ActionParams) => f.write(id, await f.plan(id, action, params));
  const read = (table: "holding" | "coil", address: number, count: number) => f.read(id, table, address, count);
  const role = d().role;
  const made: Device = {
    id,
    info: () => ({
      device_id: id,
      family: "fake",
      address: `fake/${id}`,
      ...(d().rated_power_w !== undefined ? { rated_power_w: d().rated_power_w } : {}),
      ...(d().shed_priority !== undefined ? { shed_priority: d().shed_priority } : {}),
      fully_configured: d().fully_configured,
    }),
    descriptor: () => ({
      role: d().role,
      device_type: 0,
      ...(d().max_power_w !== undefined ? { max_power_w: d().max_power_w } : {}),
      capabilities: capabilitiesOf(made),
      profile: "fake",
      identity: {},
    }),
    latest: (): Metrics => d().metrics,
    health: () => ({ online: d().online, last_ok_at: null, last_error: null, consecutive_failures: 0, op_mode: 1 }),
    ...(role === "battery"
      ? { power: { refreshMs: 20_000, setPower: (dir, w) => act(dir, { watts: w, pct: pctOf(w, d().max_power_w ?? 0) }) } }
      : {}),
    ...(role === "pv" ? { curtail: { refreshMs: 0, setLimit: (pct) => act("curtail", { pct }) } } : {}),
    ...(role === "switch"
      ? {
          switch: {
            // Like a profile's relay: the coils are read back, and one that stays closed fails the write.
            switchOff: async () => {
              await act("shed", {});
              const on = f.coils(id);
              if (on.some(Boolean))
                throw new SitegateError(
                  "CONTROL_NOT_CONFIRMED",
                  `shed did not take effect: coils read ${on.map((c) => (c ? 1 : 0)).join("")}`,
                );
            },
            outputsOn: () => d().coils_on,
          },
        }
      : {}),
    ...(role === "thermostat" ? { setpoint: { setback_c: 2, setBack: () => act("shed", {}) } } : {}),
    capture: async (action: ActionName, held?: PreState) => capturePre(await f.plan(id, action, {}), asRawWrites(held), read),
    revert: (pre: PreState) => f.write(id, [...asRawWrites(pre)].reverse()),
    verify: (pre: PreState) => verifyPre(asRawWrites(pre), read),
    handBack: () => act("release", {}),
    confirm: () => f.confirm(id),
    setRemote: (on: boolean) => f.setRemote(id, on),
  };
  return made;
}

export function battery(id: string, max: number, soc = 50): FakeSpec {
  return {
    device_id: id,
    role: "battery",
    max_power_w: max,
    fully_configured: true,
    online: true,
    metrics: { soc_pct: soc, power_w: 0 },
  };
}

export function relay(id: string, extra: Partial<FakeSpec> = {}): FakeSpec {
  return {
    device_id: id,
    role: "switch",
    fully_configured: true,
    online: true,
    metrics: {},
    coils_on: 15,
    ...extra,
  };
}

export function pv(id: string, max: number, power: number): FakeSpec {
  return {
    device_id: id,
    role: "pv",
    max_power_w: max,
    fully_configured: true,
    online: true,
    metrics: { power_w: power },
  };
}

export function meter(id: string, power: number): FakeSpec {
  return { device_id: id, role: "meter", fully_configured: true, online: true, metrics: { power_w: power } };
}

/** Fake devices as one plan sees them (dispatch/devices.ts planned() over their directory): for pure planning tests. */
export function planned(...specs: FakeSpec[]): Planned[] {
  return plannedOf(new FakeDevices(specs, new FakeClock(0)).directory);
}

/** Never asked: nothing here reads or writes the device. */
export const idleTransport: Transport = {
  isOpen: true,
  open: async () => {},
  close: async () => {},
  read: async () => [],
  writeRegisters: async () => {},
  writeCoils: async () => {},
};
