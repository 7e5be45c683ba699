// A field capture (`sitegate dump`): every register range a device's profile knows (its
// points with their scale factors, directions and minuends, the identity registers, the
// relocation markers and shifted blocks; SunSpec: the marker and every model the device
// lists), each read once through the same bus as pairing and recorded as the device
// answered: its words, its exception code, or silence, with the time it took. Identity
// registers named serial / sn are masked. The capture is plain JSON an installer can attach
// to a bug report and the simulator can serve back (`sitegate-sim --replay`).
import { planBlocks, TCP_GAP_REGS, type Range, type Table } from "../planner.js";
import { typeRegs } from "../codec.js";
import type { FixedProfile, Profile, SunSpecProfile } from "../../profiles/schema.js";
import { isSilent } from "./unavailable.js";
import { modbusExceptionCode } from "./commission.js";
import { SitegateError } from "../../errors.js";
import { PRIORITY } from "../bus.js";
import type { DeviceConfig } from "../config-schema.js";
import type { DriverPool } from "./pool.js";

export const CAPTURE_FORMAT = "sitegate-capture/1";

/** One range as the device answered it. */
export interface CapturedRange {
  unit: number;
  table: Table;
  address: number;
  count: number;
  /** The answer; absent when the device refused or stayed silent. */
  words?: number[];
  /** The Modbus exception code the device answered. */
  exception?: number;
  /** No answer within the read's timeout. */
  timeout?: true;
  /** Another failure (the connection dropped...), in words. */
  error?: string;
  ms: number;
  /** The words were replaced (a serial number). */
  masked?: true;
}

export interface Capture {
  format: typeof CAPTURE_FORMAT;
  profile: string;
  unit: number;
  ranges: CapturedRange[];
}

/** Reads one range (unit, table, address, count) once. */
export type CaptureRead = (unit: number, table: Table, address: number, count: number) => Promise<number[]>;

/** Modbus reads at most 125 registers (2000 coils) at once. */
const MAX_READ = 125;
const SERIAL = /(^|_)(serial|sn)(_|$)/;
/** The words a masked register reads: "XX" per register. */
export const MASK_WORD = 0x5858;
/** SunSpec models walked at most (a chain that never ends stops here). */
const MAX_MODELS = 64;

type Want = Range & { unit: number; mask?: boolean };

function key(r: Want): string {
  return `${r.unit}/${r.table}/${r.address}/${r.count}`;
}

/** The ranges a fixed profile reads, each once, in address order. */
export function fixedRanges(p: FixedProfile, unit: number): Want[] {
  const out: Want[] = [];
  for (const id of p.identity)
    out.push({
      unit: id.unit ?? unit,
      table: id.table,
      address: id.address,
      count: typeRegs(id.type, id.length),
      mask: SERIAL.test(id.name),
    });
  if (p.max_power)
    out.push({ unit: p.max_power.unit ?? unit, table: p.max_power.table, address: p.max_power.address, count: typeRegs(p.max_power.type) });
  const shifts = new Map<string, number[]>();
  for (const r of p.relocate) {
    out.push({ unit, table: r.marker.table, address: r.marker.address, count: 1 });
    for (const s of r.shifts) out.push({ unit, table: r.marker.table, address: r.marker.address + s, count: 1 });
    for (const m of r.points) shifts.set(m, r.shifts);
  }
  const byClass = new Map<string, Want[]>();
  for (const pt of p.points) {
    const own = pointWants(pt, unit, shifts.get(pt.metric) ?? []);
    out.push(...own);
    byClass.set(pt.class, [...(byClass.get(pt.class) ?? []), ...own]);
  }
  // the blocks of a poll of each class, and of both
  for (const ranges of [...byClass.values(), [...byClass.values()].flat()]) out.push(...pollBlocks(p, ranges));
  const seen = new Set<string>();
  return out.filter((r) => (seen.has(key(r)) ? false : (seen.add(key(r)), true))).filter((r) => r.count <= MAX_READ);
}

/** A point's registers (value, scale factor, minuend, direction), at its base and each shift. */
function pointWants(pt: FixedProfile["points"][number], unit: number, shifts: number[]): Want[] {
  const out: Want[] = [];
  const u = pt.unit ?? unit;
  const count = typeRegs(pt.type, pt.length);
  for (const s of [0, ...shifts]) {
    out.push({ unit: u, table: pt.table, address: pt.address + s, count });
    if (pt.sf_address !== undefined) out.push({ unit: u, table: "holding", address: pt.sf_address + s, count: 1 });
    if (pt.minus) out.push({ unit: u, table: pt.minus.table, address: pt.minus.address + s, count });
  }
  if (pt.direction)
    out.push({
      unit: pt.direction.unit ?? u,
      table: pt.direction.table,
      address: pt.direction.address,
      count: typeRegs(pt.direction.type),
    });
  return out;
}

/**
 * The blocks a poll reads (the planner's, reading through gaps up to the TCP figure, which
 * covers the smaller RTU ones): a device may answer a block differently from its points.
 */
function pollBlocks(p: FixedProfile, ranges: Want[]): Want[] {
  const opts = { maxRegs: p.max_read_regs, maxGap: TCP_GAP_REGS, unreadable: p.unreadable };
  const out: Want[] = [];
  for (const unit of new Set(ranges.map((r) => r.unit)))
    out.push(
      ...planBlocks(
        ranges.filter((r) => r.unit === unit),
        opts,
      ).map((b) => ({ unit, table: b.table, address: b.address, count: b.count })),
    );
  return out;
}

async function readOne(read: CaptureRead, w: Want, now: () => number): Promise<CapturedRange> {
  const t0 = now();
  const base: CapturedRange = { unit: w.unit, table: w.table, address: w.address, count: w.count, ms: 0 };
  try {
    const words = (await read(w.unit, w.table, w.address, w.count)).map(Number);
    base.words = w.mask ? words.map(() => MASK_WORD) : words;
    if (w.mask) base.masked = true;
  } catch (e) {
    const code = modbusExceptionCode(e);
    if (code !== undefined) base.exception = code;
    else if (isSilent(e)) base.timeout = true;
    else base.error = e instanceof Error ? e.message : String(e);
  }
  base.ms = Math.round((now() - t0) * 10) / 10;
  return base;
}

/** SunSpec: the marker at each base; at the first that reads "SunS", every model's header and body. */
async function sunspecCapture(p: SunSpecProfile, unit: number, read: CaptureRead, now: () => number): Promise<CapturedRange[]> {
  const out: CapturedRange[] = [];
  for (const base of p.bases) {
    const marker = await readOne(read, { unit, table: "holding", address: base, count: 2 }, now);
    out.push(marker);
    if (marker.words?.[0] !== 0x5375 || marker.words[1] !== 0x6e53) continue;
    let addr = base + 2;
    for (let i = 0; i < MAX_MODELS; i++) {
      const head = await readOne(read, { unit, table: "holding", address: addr, count: 2 }, now);
      out.push(head);
      const [id, len] = head.words ?? [];
      if (id === undefined || len === undefined || id === 0xffff) break;
      const common = id === 1;
      for (let off = 0; off < len; off += MAX_READ) {
        const count = Math.min(MAX_READ, len - off);
        const r = await readOne(read, { unit, table: "holding", address: addr + 2 + off, count }, now);
        // the common model's serial number: offsets 50..65 of the model (SunSpec model 1 "SN")
        if (common && r.words) maskSunSpecSerial(r, addr + 50);
        out.push(r);
      }
      addr += 2 + len;
    }
    break;
  }
  return out;
}

/** Masks registers [from, from+16) inside a captured range (SunSpec common model SN, 16 registers). */
function maskSunSpecSerial(r: CapturedRange, from: number): void {
  if (!r.words) return;
  for (let a = from; a < from + 16; a++) {
    const i = a - r.address;
    if (i >= 0 && i < r.words.length) {
      r.words[i] = MASK_WORD;
      r.masked = true;
    }
  }
}

/** Reads everything the profile knows from one device, once, range by range. */
export async function captureDevice(
  profile: Profile,
  unit: number,
  read: CaptureRead,
  now: () => number = () => performance.now(),
): Promise<Capture> {
  const ranges: CapturedRange[] = [];
  if (profile.kind === "sunspec") ranges.push(...(await sunspecCapture(profile, unit, read, now)));
  else for (const w of fixedRanges(profile, unit)) ranges.push(await readOne(read, w, now));
  return { format: CAPTURE_FORMAT, profile: profile.name, unit, ranges };
}

/**
 * The daemon's capture of a device it holds (`sitegate dump --config` through the control
 * socket): the device's own driver and bus, each read in the scan lane, below polling, so a
 * poll waits at most one read; the read's time then includes its wait in the bus's queue.
 */
export async function captureHeld(
  registry: { get(deviceId: string): { config: DeviceConfig } | undefined },
  pool: Pick<DriverPool, "driverFor">,
  deviceId: string,
): Promise<Capture> {
  const held = registry.get(deviceId);
  if (!held) throw new SitegateError("DEVICE_NOT_FOUND", `the gateway holds no Modbus device ${deviceId}`);
  const d = pool.driverFor(held.config);
  const opts = { priority: PRIORITY.scan, timeoutMs: d.profile.timeout_ms, retries: 0 };
  return captureDevice(d.profile, d.unit, (u, t, a, c) => d.bus.read(u, t, a, c, opts));
}
