// The telemetry buffer's size bound (telemetry.retention_max_mb): which of the oldest unsent
// rows go when it is full. Pure: the rows come from the caller (sample-store.ts).

/** Row overhead on top of the blob (record header, rowid, ts, n, base, b-tree cell), for the size bound. */
export const ROW_OVERHEAD = 20;

/** An unsent row as the bound sees it: its id, its blob's length, and its commit's key row (null: packed alone). */
export interface PendingRow {
  id: number;
  len: number;
  base: number | null;
}

/**
 * The id through which to drop, oldest first, so that `bytes` falls to `target`: whole
 * commits (it stops only where one starts, so no delta row loses its key row), never the
 * newest row. `oldest(after)` gives the next rows after an id, oldest first, a page at a
 * time. `floor` when nothing can go.
 */
export function dropThrough(
  oldest: (after: number) => PendingRow[],
  at: { floor: number; bytes: number; target: number; newest: number },
): number {
  let through = at.floor;
  let bytes = at.bytes;
  while (bytes > at.target) {
    const rows = oldest(through);
    const usable = rows.at(-1)?.id === at.newest ? rows.slice(0, -1) : rows;
    if (usable.length === 0) return through;
    for (const r of usable) {
      if (bytes <= at.target && (r.base === null || r.base === r.id)) return through;
      bytes -= r.len + ROW_OVERHEAD;
      through = r.id;
    }
  }
  return through;
}
