// The harder sites of the dispatch property world (issue 39, item 8), kept apart from
// dispatch-world.ts: device faults (the simulator's own, hw-sim/faults.ts, decided per
// request exactly as the TCP and RTU servers decide them), gateway restarts mid-event,
// hybrid batteries that cover the house load when idle, and house-load steps and PV
// clouds. All of it is optional in a WorldSpec: a world without these keys runs as before.
import { DeviceSlot, type FaultKind } from "../../hw-sim/faults.js";
import { StorageInverter } from "../../hw-sim/models/sunspec-devices.js";
import type { SiteModel } from "../../hw-sim/site-model.js";

/** The device faults a world may schedule (the simulator's POST /faults kinds). */
export type WorldFaultKind = Extract<FaultKind, "ignore_writes" | "refuse_writes" | "exception" | "offline" | "late_first">;
export const WORLD_FAULT_KINDS: readonly WorldFaultKind[] = ["ignore_writes", "refuse_writes", "exception", "offline", "late_first"];

export interface WorldFault {
  /** A Modbus device of the world by name (bat1, pv1, grid, relay1, ...). */
  device: string;
  fault: WorldFaultKind;
  from_s: number;
  /** Cleared at this second (DELETE /faults/<name>). */
  until_s: number;
  /** refuse_writes, exception: the exception code. */
  code?: number;
  /** late_first: how late, ms; past the gateway's answer timeout the answer is a timeout (the write was applied all the same). */
  delay_ms?: number;
}

/** The gateway stops `down_s` seconds: a crash (no put back, devices hold what they were told) or a clean stop. */
export interface WorldRestart {
  at_s: number;
  down_s: number;
  crash: boolean;
}

/** The site changes under the gateway: a house-load step, a cloud (irradiance), or both. */
export interface WorldStep {
  at_s: number;
  load_delta_w?: number;
  irradiance?: number;
}

/** The gateway's answer timeout in the world: an answer later than this is a timeout. */
export const WORLD_ANSWER_TIMEOUT_MS = 1000;
/** The release backoff's cap (B4: 1 s doubling to 60 s) plus two polls: a driven device's grace after its faults cleared. */
export const RELEASE_GRACE_S = 62;

/**
 * A battery inverter that, while no forced mode is set (StorCtl_Mod 0), covers its share of
 * the house load less the PV output, as a hybrid in its own self-consumption mode does:
 * discharging into a deficit, charging from a surplus, within its power and state of charge.
 */
export class HybridStorage extends StorageInverter {
  constructor(
    spec: ConstructorParameters<typeof StorageInverter>[0],
    site: SiteModel,
    /** The house load less PV, W: this battery's share of it. */
    private readonly deficitW: () => number,
  ) {
    super(spec, site);
  }

  override acPowerW(): number {
    if (this.ctl !== 0 || !this.ctl123.conn) return super.acPowerW();
    const w = Math.max(-this.maxW, Math.min(this.maxW, this.deficitW()));
    if (w > 0 && this.soc <= this.minRsv) return 0;
    if (w < 0 && this.soc >= 100) return 0;
    return Math.round(w);
  }
}

/** The faults of one device over a world: which hold at second t, and when the last one cleared. */
export class FaultTimeline {
  constructor(private readonly faults: readonly WorldFault[]) {}

  /** Sets and clears the faults due at second t on the real site's slots. */
  apply(t: number, slots: ReadonlyMap<string, DeviceSlot>): void {
    for (const f of this.faults) {
      const slot = slots.get(f.device);
      if (!slot) continue;
      if (t === f.from_s)
        slot.setFault({
          device: f.device,
          fault: f.fault,
          ...(f.code !== undefined ? { code: f.code } : {}),
          ...(f.delay_ms !== undefined ? { delay_ms: f.delay_ms } : {}),
        });
      if (t === f.until_s) {
        slot.faults.delete(f.fault);
        // The gateway reconnects to a device that comes back: its next answer is a first one.
        if (f.fault === "offline") slot.connected();
      }
    }
  }

  /** Whether a device had any fault scheduled at all. */
  touches(device: string): boolean {
    return this.faults.some((f) => f.device === device);
  }

  /** Any fault on the device at second t. */
  active(device: string, t: number): boolean {
    return this.faults.some((f) => f.device === device && t >= f.from_s && t < f.until_s);
  }

  /** A fault of one of these kinds on the device at second t. */
  activeOf(device: string, t: number, kinds: readonly WorldFaultKind[]): boolean {
    return this.faults.some((f) => f.device === device && kinds.includes(f.fault) && t >= f.from_s && t < f.until_s);
  }

  /** The second the device's last fault cleared (0 when it had none). */
  clearedAt(device: string): number {
    return Math.max(0, ...this.faults.filter((f) => f.device === device).map((f) => f.until_s));
  }

  /** The second the last fault of the world clears. */
  get lastClear(): number {
    return Math.max(0, ...this.faults.map((f) => f.until_s));
  }
}

/** B4: a sample stands for its device for the gateway's hold time (two polls, at least 5 s), then silence counts as nothing. */
export const SAMPLE_HOLD_S = 5;

type Claim = ReadonlyArray<{ event_id: string; watts: number }>;
type Claims = ReadonlyMap<string, Claim>;

/**
 * The events a device's physical effect belongs to. While an event drives it, that event's.
 * When the device goes silent (offline, or answering reads with exceptions) and the event
 * lets go of it with the device still in the state it was driven to, the device goes on
 * delivering what the event asked for: physically the event's, for as long as the gateway
 * may know it (B4: its last reading holds for the hold time, then silence counts as nothing).
 */
export class SilentHold {
  private readonly last = new Map<string, { cs: Claim; t: number }>();

  constructor(private readonly faults: FaultTimeline) {}

  claims(claims: Claims, t: number, driven: (device: string) => boolean): Claims {
    const out = new Map(claims);
    for (const [id, cs] of claims) this.last.set(id, { cs, t });
    for (const [id, l] of this.last) {
      if (claims.has(id)) continue;
      if (t - l.t < SAMPLE_HOLD_S && this.silent(id, t) && driven(id)) out.set(id, l.cs);
      else this.last.delete(id);
    }
    return out;
  }

  private silent(device: string, t: number): boolean {
    return this.faults.activeOf(device, t, ["offline", "exception"]);
  }
}
