// B4 restart gaps. A clean stop puts every device back, so the means of its events end at
// the stop (putBack; a driven device offline then is taken up as after a crash). After a
// crash: "for the restart gap it counts what the devices read back once it is up again". The
// devices held what they were told while the gateway was down, so before anything is written
// or put back at start, every device is read once (readBack), and that reading stands for
// the gap of every event taken up again: also of one whose end passed meanwhile, which then
// ends at once, its devices put back before the API starts. A device that does not answer
// leaves the gap unmeasured: its event says `measured: false` and is credited no more than
// its last reading before the crash, held for the hold time.
import { errorMessage } from "../errors.js";
import type { Logger } from "../log.js";
import type { Device, DeviceDirectory } from "../model/device.js";
import type { Snapshot } from "../telemetry/types.js";
import { within, type Clock } from "../util/clock.js";
import { planned } from "./devices.js";
import type { Executor } from "./executor.js";
import type { Ledger } from "./ledger.js";
import type { EventRow, EventStore, Progress } from "./store.js";

import { addSample, resumed, type MeanState } from "./measure.js";

/** How long the read before the put-back may take: a device that has not answered by then leaves its events' gap unmeasured. */
export const READ_BACK_MS = 5000;

/** A poll snapshot to the executor; true when an event is past its end (it ends now). */
export function observeRunning(exec: Executor, snap: Snapshot, running: ReadonlyMap<string, EventRow>, now: number): boolean {
  exec.observe(snap, [...running.values()], now);
  return [...running.values()].some((r) => r.spec.end_ms <= now);
}

export interface ReadBackDeps {
  devices: Pick<DeviceDirectory, "list">;
  clock: Clock;
  log: Logger;
}

/** At start: the running events taken up again (`resumed`: each gap listed) and committed; true when the gateway had crashed. */
export function resumeAll(running: readonly EventRow[], now: number, store: Pick<EventStore, "saveProgress">): boolean {
  let crashed = false;
  for (const row of running) {
    if (!resumed(row, now)) continue;
    store.saveProgress(row, now);
    crashed ||= row.progress.resumed_at === now;
  }
  return crashed;
}

/**
 * After a crash, before anything is written or put back: every device is read once, and the
 * running events take that reading as their first after the restart (planned as before the
 * crash, nothing written), so it stands for the gap. False when the gateway was stopped meanwhile.
 */
export async function readBack(
  exec: Executor,
  deps: ReadBackDeps,
  store: Pick<EventStore, "saveProgress">,
  running: readonly EventRow[],
): Promise<boolean> {
  const devices = deps.devices.list().filter((d) => d.descriptor() !== null && d.confirm !== undefined);
  const answered = new Map<string, Record<string, number>>();
  const reads = devices.map((d) =>
    read(d).then(
      (m) => void answered.set(d.id, m),
      (e: unknown) =>
        deps.log.warn(
          { device_id: d.id, err: errorMessage(e) },
          "no reading of the device before the put-back: its restart gap is unmeasured",
        ),
    ),
  );
  await within(deps.clock, Promise.allSettled([...reads, ...unacked(exec, running)]), READ_BACK_MS);
  if (exec.jobs.stopping) return false;
  const at = deps.clock.now();
  const silent = new Set(devices.filter((d) => !answered.has(d.id)).map((d) => d.id));
  for (const row of running)
    if (row.progress.resumed_at !== undefined && measuredBy(row.progress).some((id) => silent.has(id))) row.progress.gap_unmeasured = true;
  // A device with nothing to read ({}) stays out: its latest values are from before the crash.
  const snap: Snapshot = {
    ts: at,
    devices: [...answered].filter(([, m]) => Object.keys(m).length).map(([id, m]) => ({ device_id: id, metrics: m })),
  };
  const unread = running.map((r) => unsampled(r.progress));
  // Planned as before the crash; a device that answered is online, though not polled yet since the start.
  exec.plan(
    running,
    at,
    planned(deps.devices).map((d) => (answered.has(d.device.id) ? { ...d, online: true } : d)),
  );
  exec.observe(snap, running, at, false);
  running.forEach((r, i) => fromFirstWrite(r.progress, unread[i] ?? [], at));
  for (const row of running) store.saveProgress(row, at);
  return true;
}

function read(d: Device): Promise<Record<string, number>> {
  return d.confirm ? d.confirm() : Promise.resolve({});
}

/**
 * A device the crashed run wrote for an event whose acknowledgement was not committed yet (a
 * crash in the event's first second): it counts as written once it reads other than its
 * pre-event state (B4 closed loop: the device shows it), from the event's first write. One
 * that reads its pre-event state, or whose registers are write-only, stays unwritten.
 */
function unacked(exec: Executor, running: readonly EventRow[]): Array<Promise<void>> {
  const out: Array<Promise<void>> = [];
  for (const l of exec.ledger.all()) {
    const rows = running.filter((r) => l.holders.includes(r.spec.event_id) && r.progress.first_write_at !== undefined);
    const open = rows
      .map((r) => r.progress.devices[l.device_id])
      .filter((dp) => dp !== undefined && dp.writes_ok === 0 && dp.error === undefined);
    if (open.length === 0 || l.unreleased !== undefined) continue;
    const shown = exec.ledger.verify(l.device_id, l.pre).then(
      (mismatch) => mismatch !== undefined,
      () => false,
    );
    out.push(
      shown.then((written) => {
        if (!written) return;
        for (const r of rows) {
          const dp = r.progress.devices[l.device_id];
          if (!dp || dp.writes_ok > 0 || dp.error !== undefined) continue;
          dp.writes_ok = 1;
          dp.acked_at = Math.max(r.progress.first_write_at ?? l.created_at, l.created_at);
        }
      }),
    );
  }
  return out;
}

/** The means of an event with no sample yet ("driven", "drop", or a device id). */
function unsampled(p: Progress): string[] {
  const out = Object.entries(p.devices).flatMap(([id, dp]) => (dp.mean ? [] : [id]));
  if (!p.driven) out.push("driven");
  if (!p.drop) out.push("drop");
  return out;
}

/**
 * A crash in an event's first seconds, before any reading of it: its first reading, taken
 * before the put-back, stands for the gap since the event's first write (before it, nothing
 * was driven), as a reading after the restart does for a gap that follows one (measure.ts);
 * a device's own since it showed its first write.
 */
function fromFirstWrite(p: Progress, unread: readonly string[], at: number): void {
  const since = p.resumed_at;
  if (since === undefined) return;
  const widen = (s: MeanState | undefined, from: number | undefined): MeanState | undefined =>
    s && from !== undefined && from < since && s.from === at && s.at === at
      ? { ...s, from, area: s.value * (at - from), gap_rate: s.value }
      : s;
  if (unread.includes("driven")) p.driven = widen(p.driven, p.first_write_at);
  if (unread.includes("drop")) p.drop = widen(p.drop, p.first_write_at);
  for (const [id, dp] of Object.entries(p.devices)) if (unread.includes(id)) dp.mean = widen(dp.mean, dp.acked_at);
}

/** The devices an event's measurement reads: those it wrote to, and its meter. */
function measuredBy(p: Progress): string[] {
  const ids = Object.entries(p.devices)
    .filter(([, dp]) => dp.writes_ok > 0)
    .map(([id]) => id);
  return p.meter_id ? [...ids, p.meter_id] : ids;
}

/**
 * A clean stop at `now` puts every device back (B4): what each mean of the event held ends
 * there, so the sample before the stop does not go on counting into the gap that follows.
 * A device `held` (driven, and offline or its release unreleased already) cannot be put back and may
 * hold its setpoint through the gap: its mean stays open, and the event is taken up as after
 * a crash (the read at start stands for the gap, or leaves it unmeasured). A battery that went
 * offline while it charged had been credited nothing for the gap it went on charging through
 * (soak 364923659 #3953).
 */
export function putBack(p: Progress, now: number, holdMs: number, held: (id: string) => boolean = () => false): void {
  const close = (s: MeanState | undefined) => (s ? addSample(s, now, 0, holdMs) : undefined);
  for (const [id, dp] of Object.entries(p.devices)) if (dp.mean && !held(id)) dp.mean = close(dp.mean);
  if (Object.entries(p.devices).some(([id, dp]) => dp.writes_ok > 0 && held(id))) return;
  if (p.driven) p.driven = close(p.driven);
  if (p.drop) p.drop = close(p.drop);
  p.put_back = true;
}

/** A clean stop, before the put-back: the running events' means end at `now` but for the devices that cannot be put back (putBack), committed. */
export function putBackAll(
  running: Iterable<EventRow>,
  deps: { devices: Pick<DeviceDirectory, "get">; ledger: Pick<Ledger, "get"> },
  now: number,
  holdMs: number,
  store: Pick<EventStore, "saveProgress">,
): void {
  // Driven (a ledger row) and beyond reach: a release already unreleased, or the device offline.
  const held = (id: string) => {
    const l = deps.ledger.get(id);
    return l !== undefined && (l.unreleased !== undefined || deps.devices.get(id)?.health().online === false);
  };
  for (const row of running) {
    putBack(row.progress, now, holdMs, held);
    store.saveProgress(row, now);
  }
}
