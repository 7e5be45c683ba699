// The device ledger: what dispatch wrote to each device and the raw state the device
// was in before (coil states, PV connection and limit, battery mode and rates: whatever
// the action's registers held). A row is committed before the first write that needs it
// and deleted only once the device has been put back, so after a kill -9 or a power cut
// the next start still knows what to undo. One row per device: events that share a
// device (stacking, one event taking over from another) share the row, and its pre-event
// state is the one from before the first of them.
import { SitegateError, errorMessage } from "../errors.js";
import type { Db } from "../storage/db.js";
import type { ActionName } from "../profiles/schema.js";
import { writeLength, type ActionParams, type DeviceControl, type RawWrite } from "./control.js";
import { withFullSync } from "../storage/durable.js";

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
  /** The state before the first write, as raw writes that put it back, in the order read. */
  pre: RawWrite[];
  created_at: number;
  updated_at: number;
}

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
}

function cells(w: RawWrite): string[] {
  const unit = w.unit === undefined ? "" : `${w.unit}/`;
  return Array.from({ length: writeLength(w) }, (_, i) => `${unit}${w.table}:${w.address + i}`);
}

function fromWords(table: "holding" | "coil", address: number, values: number[], unit?: number, writeOnly = false): RawWrite {
  const u = { ...(unit === undefined ? {} : { unit }), ...(writeOnly ? { restore: values } : {}) };
  return table === "coil"
    ? { table, address, ...u, words: [], coils: values.map((v) => v !== 0) }
    : { table, address, ...u, words: values, coils: [] };
}

export class Ledger {
  private readonly rows = new Map<string, LedgerRow>();
  private readonly stmts;

  constructor(
    private readonly db: Db,
    private readonly control: DeviceControl,
  ) {
    this.stmts = {
      all: db.prepare("SELECT device_id, holders, actions, pre, created_at, updated_at FROM dp_ledger ORDER BY device_id"),
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
        pre: JSON.parse(r.pre) as RawWrite[],
        created_at: r.created_at,
        updated_at: r.updated_at,
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
        ...row,
        holders: JSON.stringify(row.holders),
        actions: JSON.stringify(row.actions),
        pre: JSON.stringify(row.pre),
      });
    if (full) withFullSync(this.db, run);
    else run();
    this.rows.set(row.device_id, row);
  }

  /**
   * Writes a profile action for `holders`: first the pre-event state of every register or
   * coil it touches that the ledger does not hold yet is read and committed
   * (synchronous=FULL), then the action is written. A device whose state cannot be read
   * is not written: without it nothing could put the device back.
   */
  async hold(deviceId: string, holders: readonly string[], action: ActionName, params: ActionParams, now: number): Promise<void> {
    const old = this.rows.get(deviceId);
    const writes = await this.control.plan(deviceId, action, { ...params, held: old?.pre });
    if (writes.length === 0)
      throw new SitegateError("DEVICE_NOT_FOUND", `device ${deviceId} has none of the registers of its ${action} action`);
    const row: LedgerRow = old
      ? { ...old, holders: [...old.holders], actions: [...old.actions], pre: [...old.pre] }
      : { device_id: deviceId, holders: [], actions: [], pre: [], created_at: now, updated_at: now };
    const known = new Set(row.pre.flatMap(cells));
    let changed = !old;
    for (const w of writes) {
      const cs = cells(w);
      if (cs.every((c) => known.has(c))) continue;
      if (w.restore) {
        // The device will not tell: the profile says what puts this register back.
        if (cs.some((c) => !known.has(c))) row.pre.push(fromWords(w.table, w.address, w.restore, w.unit, true));
      } else if (cs.every((c) => !known.has(c))) {
        row.pre.push(fromWords(w.table, w.address, await this.control.read(deviceId, w.table, w.address, writeLength(w), w.unit), w.unit));
      } else {
        for (let i = 0; i < cs.length; i++) {
          if (known.has(cs[i])) continue;
          row.pre.push(fromWords(w.table, w.address + i, await this.control.read(deviceId, w.table, w.address + i, 1, w.unit), w.unit));
        }
      }
      for (const c of cs) known.add(c);
      changed = true;
    }
    for (const h of holders) {
      if (!row.holders.includes(h)) {
        row.holders.push(h);
        changed = true;
      }
    }
    if (!row.actions.includes(action)) {
      row.actions.push(action);
      changed = true;
    }
    if (changed) {
      row.updated_at = now;
      this.save(row, true); // durable before the device is touched
    }
    await this.control.write(deviceId, writes);
    await this.control.readBack?.(deviceId, action);
  }

  /**
   * Puts the device back: its pre-event state written in reverse order (the mode before
   * the rates, the limit's enable before the limit), then read back; or, when the ledger
   * holds no state for it, the profile's `release` action. The row goes only once the
   * write-back was acknowledged; a failure throws and leaves it for the next attempt.
   */
  async release(deviceId: string): Promise<ReleaseOutcome> {
    const row = this.rows.get(deviceId);
    if (!row) return { verified: true };
    let outcome: ReleaseOutcome = { verified: false };
    if (row.pre.length > 0) {
      await this.control.write(deviceId, [...row.pre].reverse());
      const mismatch = await this.verify(deviceId, row.pre).catch((e) => `cannot read back: ${errorMessage(e)}`);
      outcome = mismatch ? { verified: false, mismatch } : { verified: true };
    } else if (this.control.hasAction(deviceId, "release")) {
      await this.control.write(deviceId, await this.control.plan(deviceId, "release", {}));
      await this.control.readBack?.(deviceId, "release");
    }
    this.stmts.del.run(deviceId);
    this.rows.delete(deviceId);
    return outcome;
  }

  /** Forgets a device that can no longer be reached (removed from the registry). */
  forget(deviceId: string): void {
    this.stmts.del.run(deviceId);
    this.rows.delete(deviceId);
  }

  /** Reads the registers and coils of `pre` back: undefined when they hold those values, else what differs. */
  async verify(deviceId: string, pre: readonly RawWrite[]): Promise<string | undefined> {
    const diffs: string[] = [];
    for (const w of pre) {
      if (w.restore) continue; // write-only: it cannot be read back
      const now = await this.control.read(deviceId, w.table, w.address, writeLength(w), w.unit);
      const want = w.table === "coil" ? w.coils.map((c) => (c ? 1 : 0)) : w.words;
      want.forEach((v, i) => {
        const got = w.table === "coil" ? (now[i] ? 1 : 0) : now[i];
        if (got !== v) diffs.push(`${w.table} ${w.address + i} reads ${got}, was ${v} before`);
      });
    }
    return diffs.length ? diffs.join("; ") : undefined;
  }
}
