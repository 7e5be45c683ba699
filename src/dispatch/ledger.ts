// The device ledger: what dispatch wrote to each device and the state the device was in
// before, as the device captured it (an opaque pre-state only its family reads: a Modbus
// device's registers and coils, a plug's on/off, a thermostat's setpoint). A row is committed before the first write that needs it
// and deleted only once the device has been put back, so after a kill -9 or a power cut
// the next start still knows what to undo. One row per device: events that share a
// device (stacking, one event taking over from another) share the row, and its pre-event
// state is the one from before the first of them. A release that does not read back keeps
// the row, marked unreleased with what differs (B4 "Closed loop"): the pre-state stays the
// oldest undisturbed one, never a state the gateway itself drove, and the executor retries
// the release with backoff until the device reads it back.
import { SitegateError, errorMessage } from "../errors.js";
import type { Db } from "../storage/db.js";
import type { Device, DeviceDirectory, PreState } from "../model/device.js";
import type { ActionName } from "../model/vocabulary.js";
import { withFullSync } from "../storage/durable.js";
import { PartialWriteError } from "../model/partial-write.js";
import { apply, type Setting } from "./devices.js";

export const LEDGER_SQL = `
  CREATE TABLE dp_ledger (
    device_id TEXT PRIMARY KEY,
    holders TEXT NOT NULL,
    actions TEXT NOT NULL,
    pre TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
  ) WITHOUT ROWID;
`;

export interface LedgerRow {
  device_id: string;
  /** Events that drive (or drove) the device since the row was made. */
  holders: string[];
  /** Actions written (shed, curtail, discharge, ...), in first-written order. */
  actions: ActionName[];
  /** The state before the first write, as the device captured it (JSON). */
  pre: PreState;
  created_at: number;
  updated_at: number;
  /** Why the last release (or a rollback) did not put the device back; absent while it has not failed. */
  unreleased?: string;
}

/** The unreleased mark (dispatch migration 6): a release that did not read back, kept for its retry. */
export const LEDGER_UNRELEASED_SQL = "ALTER TABLE dp_ledger ADD COLUMN unreleased TEXT";

export interface ReleaseOutcome {
  /** The device reads back its pre-event state (false when it could not be checked). */
  verified: boolean;
  /** What differs after the write-back, if anything. */
  mismatch?: string;
}

interface RawRow {
  device_id: string;
  holders: string;
  actions: string;
  pre: string;
  created_at: number;
  updated_at: number;
  unreleased: string | null;
}

/** Whether the device finds anything to write back in `pre`: the ledger never looks inside it. */
function holdsState(d: Device, pre: PreState): boolean {
  return d.holdsState ? d.holdsState(pre) : pre !== undefined && pre !== null;
}

export class Ledger {
  private readonly rows = new Map<string, LedgerRow>();
  private readonly stmts;

  constructor(
    private readonly db: Db,
    private readonly devices: Pick<DeviceDirectory, "get">,
  ) {
    this.stmts = {
      all: db.prepare("SELECT device_id, holders, actions, pre, created_at, updated_at, unreleased FROM dp_ledger ORDER BY device_id"),
      mark: db.prepare("UPDATE dp_ledger SET unreleased = ?, updated_at = ? WHERE device_id = ?"),
      upsert: db.prepare(
        `INSERT INTO dp_ledger (device_id, holders, actions, pre, created_at, updated_at) VALUES (@device_id, @holders, @actions, @pre, @created_at, @updated_at)
         ON CONFLICT (device_id) DO UPDATE SET holders = excluded.holders, actions = excluded.actions, pre = excluded.pre, updated_at = excluded.updated_at`,
      ),
      del: db.prepare("DELETE FROM dp_ledger WHERE device_id = ?"),
    };
    for (const r of this.stmts.all.all() as RawRow[]) {
      this.rows.set(r.device_id, {
        device_id: r.device_id,
        holders: JSON.parse(r.holders) as string[],
        actions: JSON.parse(r.actions) as ActionName[],
        pre: JSON.parse(r.pre) as PreState,
        created_at: r.created_at,
        updated_at: r.updated_at,
        ...(r.unreleased !== null ? { unreleased: r.unreleased } : {}),
      });
    }
  }

  all(): LedgerRow[] {
    return [...this.rows.values()];
  }

  get(deviceId: string): LedgerRow | undefined {
    return this.rows.get(deviceId);
  }

  get size(): number {
    return this.rows.size;
  }

  private save(row: LedgerRow, full: boolean): void {
    const run = () =>
      this.stmts.upsert.run({
        device_id: row.device_id,
        created_at: row.created_at,
        updated_at: row.updated_at,
        holders: JSON.stringify(row.holders),
        actions: JSON.stringify(row.actions),
        pre: JSON.stringify(row.pre),
      });
    if (full) withFullSync(this.db, run);
    else run();
    this.rows.set(row.device_id, row);
  }

  private device(deviceId: string): Device {
    const d = this.devices.get(deviceId);
    if (!d) throw new SitegateError("DEVICE_NOT_FOUND", `device ${deviceId} is not configured`);
    return d;
  }

  /**
   * Writes a setting for `holders`: first the device captures the pre-event state of what
   * the action changes that the ledger does not hold yet, and it is committed
   * (synchronous=FULL), then the setting is written. A device whose state cannot be read
   * is not written: without it nothing could put the device back. An action the device
   * refuses part-way (PartialWriteError) has the steps it took put back at once; a
   * rollback the device refuses too leaves the row unreleased, for the release's retry.
   * `wanted` is asked once the state is read: an event cancelled meanwhile writes nothing.
   */
  async hold(deviceId: string, holders: readonly string[], setting: Setting, now: number, wanted = () => true): Promise<void> {
    const d = this.device(deviceId);
    const old = this.rows.get(deviceId);
    const pre = await d.capture(setting.action, old?.pre);
    if (!wanted()) return; // its events ended (a cancellation) while the state was read: nothing is written
    const row: LedgerRow = old
      ? { ...old, holders: [...old.holders], actions: [...old.actions], pre }
      : { device_id: deviceId, holders: [], actions: [], pre, created_at: now, updated_at: now };
    let changed = !old || JSON.stringify(old.pre) !== JSON.stringify(pre);
    for (const h of holders) {
      if (!row.holders.includes(h)) {
        row.holders.push(h);
        changed = true;
      }
    }
    if (!row.actions.includes(setting.action)) {
      row.actions.push(setting.action);
      changed = true;
    }
    if (changed) {
      row.updated_at = now;
      this.save(row, true); // durable before the device is touched
    }
    try {
      await apply(d, setting, row.pre);
    } catch (e) {
      if (!(e instanceof PartialWriteError)) throw e;
      // Refused part-way: the steps already written go back now, in the same tick.
      try {
        await e.rollback(row.pre);
      } catch (r) {
        const why = `${e.message}; putting back the steps written was refused too: ${errorMessage(r)}`;
        this.markUnreleased(deviceId, why, now);
        throw new SitegateError(e.code, why, { cause: e });
      }
      throw new SitegateError(e.code, `${e.message}; the steps written were put back`, { cause: e });
    }
  }

  /**
   * Puts the device back: the device writes its pre-event state back and reads it back;
   * or, when the ledger holds no state for it, it goes back to its own control (a
   * profile's `release`). The row goes only once the device reads its pre-event state
   * back; a write-back that fails or does not read back keeps it, marked unreleased with
   * what differs, for the next attempt. Throws only when the device is not configured.
   */
  async release(deviceId: string, now = Date.now()): Promise<ReleaseOutcome> {
    const row = this.rows.get(deviceId);
    if (!row) return { verified: true };
    const d = this.device(deviceId);
    let mismatch: string | undefined;
    try {
      if (holdsState(d, row.pre)) {
        await d.revert(row.pre);
        mismatch = await d.verify(row.pre).catch((e) => `cannot read back: ${errorMessage(e)}`);
      } else await d.handBack?.();
    } catch (e) {
      mismatch = `cannot write back: ${errorMessage(e)}`;
    }
    if (mismatch !== undefined) {
      this.markUnreleased(deviceId, mismatch, now);
      return { verified: false, mismatch };
    }
    this.stmts.del.run(deviceId);
    this.rows.delete(deviceId);
    return { verified: true };
  }

  /** Marks a row unreleased (a release or a rollback the device did not follow): kept, committed, retried. */
  markUnreleased(deviceId: string, why: string, now: number): void {
    const row = this.rows.get(deviceId);
    if (!row) return;
    row.unreleased = why;
    row.updated_at = now;
    withFullSync(this.db, () => this.stmts.mark.run(why, now, deviceId));
  }

  /** Rows whose release has failed: each blocks its own device, and nothing else. */
  unreleased(): LedgerRow[] {
    return this.all().filter((r) => r.unreleased !== undefined);
  }

  /** Forgets a device that can no longer be reached (removed from the registry). */
  forget(deviceId: string): void {
    this.stmts.del.run(deviceId);
    this.rows.delete(deviceId);
  }

  /** Reads the device back against `pre`: undefined when it holds it, else what differs. */
  async verify(deviceId: string, pre: PreState): Promise<string | undefined> {
    return this.device(deviceId).verify(pre);
  }
}
