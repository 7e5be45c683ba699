// A field capture (`sitegate dump`) served with the brand model's physics on top
// (`sitegate-sim --replay dump.json --physics`): the brand model of the capture's profile
// runs on a site of its own, and each register answers
//   - what the device answered in the field (the capture), while the model's value of that
//     register is still what it was when the replay started: the field's identity, type
//     codes, ratings and settings are served as captured;
//   - the model's value, once the model's physics or a write moved it (a charge moves the
//     battery power and the SOC; a mode write moves the mode): the capture cannot move;
//   - the capture's exception or silence where the device gave one (the field device lacks
//     that register, whatever the model has);
//   - the model's answer for a register never captured.
// "Moved" is judged per captured value: the smallest captured range holding the register
// (a point's own registers), so that a 32-bit value is never half field, half model.
// Writes go to the model and are applied. The site's truth is the control API (GET /state).
import { Endpoint, type Decision } from "./faults.js";
import { ModbusException, ILLEGAL_ADDRESS, exceptionPdu } from "./modbus-pdu.js";
import type { DeviceView, SimDevice } from "./models/device.js";
import { brandRow } from "./models/brands/index.js";
import { FN_TABLE, ReplayEndpoint, reply, type ReplayCapture } from "./replay.js";
import { startSim, type SimHandle } from "./sim.js";
import type { ScenarioInput } from "./scenario.js";

type WordTable = "holding" | "input";
type Captured = ReplayCapture["ranges"][number];

/** The scenario device's name of the replayed device. */
export const REPLAY_DEVICE = "replay";

/** One unit's model with the capture laid under it. */
export class CaptureOverlay implements SimDevice {
  private readonly words: Record<WordTable, Map<number, number>> = { holding: new Map(), input: new Map() };
  /** The smallest captured range (with words) that holds each register. */
  private readonly value: Record<WordTable, Map<number, { address: number; count: number }>> = { holding: new Map(), input: new Map() };
  /** The model's words when the replay started. */
  private readonly start: Record<WordTable, Map<number, number>> = { holding: new Map(), input: new Map() };

  constructor(
    private readonly inner: SimDevice,
    ranges: readonly Captured[],
  ) {
    for (const r of ranges) {
      if (r.unit !== inner.unit || !r.words || (r.table !== "holding" && r.table !== "input")) continue;
      const t = r.table;
      r.words.forEach((w, i) => {
        this.words[t].set(r.address + i, w);
        const had = this.value[t].get(r.address + i);
        if (!had || had.count > r.count) this.value[t].set(r.address + i, { address: r.address, count: r.count });
      });
    }
    for (const t of ["holding", "input"] as const)
      for (const [a, w] of this.modelWords(t, [...this.words[t].keys()])) this.start[t].set(a, w);
  }

  get name(): string {
    return this.inner.name;
  }
  get unit(): number {
    return this.inner.unit;
  }
  get model(): string {
    return this.inner.model;
  }
  get maxReadRegs(): number {
    return this.inner.maxReadRegs;
  }
  set maxReadRegs(n: number) {
    this.inner.maxReadRegs = n;
  }
  view(): DeviceView {
    return this.inner.view();
  }
  set(values: Record<string, unknown>): void {
    this.inner.set(values);
  }
  readHolding(address: number, count: number): number[] {
    return this.merged("holding", address, count);
  }
  readInput(address: number, count: number): number[] {
    return this.merged("input", address, count);
  }
  writeHolding(address: number, values: number[]): void {
    this.inner.writeHolding(address, values);
  }
  readCoils(address: number, count: number): boolean[] {
    return this.inner.readCoils(address, count);
  }
  writeCoils(address: number, values: boolean[]): void {
    this.inner.writeCoils(address, values);
  }

  /** The model's words at these registers now (a register the model refuses is left out). */
  private modelWords(t: WordTable, addresses: readonly number[]): Map<number, number> {
    const out = new Map<number, number>();
    const read = (a: number, n: number) => (t === "holding" ? this.inner.readHolding(a, n) : this.inner.readInput(a, n));
    for (const a of addresses) {
      if (out.has(a)) continue;
      try {
        out.set(a, read(a, 1)[0]!);
      } catch {
        // the model has no such register: the capture answers it
      }
    }
    return out;
  }

  private merged(t: WordTable, address: number, count: number): number[] {
    const wanted = new Set<number>();
    for (let a = address; a < address + count; a++) {
      wanted.add(a);
      const v = this.value[t].get(a);
      if (v) for (let b = v.address; b < v.address + v.count; b++) wanted.add(b);
    }
    const now = this.modelWords(
      t,
      [...wanted].sort((x, y) => x - y),
    );
    const moved = (a: number) => now.has(a) && this.start[t].has(a) && now.get(a) !== this.start[t].get(a);
    const out: number[] = [];
    for (let a = address; a < address + count; a++) {
      const field = this.words[t].get(a);
      const v = this.value[t].get(a);
      const model = now.get(a);
      if (field === undefined) {
        if (model === undefined) throw new ModbusException(ILLEGAL_ADDRESS);
        out.push(model);
        continue;
      }
      let byModel = false;
      for (let b = v!.address; v && b < v.address + v.count && !byModel; b++) byModel = moved(b);
      out.push(byModel && model !== undefined ? model : field);
    }
    return out;
  }
}

/** The capture's exceptions and silences, before the model is asked. */
class CaptureFailures extends Endpoint {
  constructor(private readonly capture: ReplayEndpoint) {
    super();
  }

  override decide(unit: number, pdu: Buffer, absentUnit: "silent" | "gateway_exception"): Decision {
    const fn = pdu[0] ?? 0;
    const t = FN_TABLE[fn];
    if (t && pdu.length >= 5) {
      const [address, count] = [pdu.readUInt16BE(1), pdu.readUInt16BE(3)];
      if (!this.capture.captured(unit, t, address, count)) {
        const f = this.capture.failure(unit, t, address, count);
        if (f?.timeout) return { kind: "silent" };
        if (f) return reply(exceptionPdu(fn, f.exception ?? ILLEGAL_ADDRESS));
      }
    }
    return super.decide(unit, pdu, absentUnit);
  }
}

/** The scenario device of the capture's brand model, where the brands site places it, at the capture's unit. */
export function replayDevice(capture: ReplayCapture): Record<string, unknown> {
  let row;
  try {
    row = brandRow(capture.profile);
  } catch {
    throw new Error(`the simulator has no brand model for profile "${capture.profile}": replay it frozen (without --physics)`);
  }
  const { bus: _bus, shared_unit: _shared, profile: _profile, name: _name, ...keys } = row.site[0]!;
  const device: Record<string, unknown> = { ...keys, model: row.model, name: REPLAY_DEVICE };
  // A device paired on another unit than its own (the GX's VE.Bus unit) keeps its own units.
  if (row.pairedUnit) {
    const paired = row.pairedUnit(row.schema.parse(device));
    if (paired !== capture.unit)
      throw new Error(`a ${row.model} capture is of unit ${paired} in the simulator's model, this one of unit ${capture.unit}`);
  } else device.unit = capture.unit;
  return device;
}

/** Serves a capture with its brand model's physics on a Modbus TCP port, with the control API. */
export async function startPhysicsReplay(
  capture: ReplayCapture,
  listen = "127.0.0.1:0",
  controlListen = "127.0.0.1:0",
): Promise<SimHandle> {
  const scenario = {
    seed: 3,
    control: { listen: controlListen },
    site: { base_load_w: 3500, load_noise_pct: 0, pv_irradiance: 0 },
    ports: [{ kind: "tcp", listen, devices: [replayDevice(capture)] }],
  } as ScenarioInput;
  const failures = new ReplayEndpoint(capture);
  return startSim(scenario, {
    endpoint: () => new CaptureFailures(failures),
    device: (d) => new CaptureOverlay(d, capture.ranges),
  });
}
