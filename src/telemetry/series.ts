// The sample store's dictionary of series: each (device, metric) pair gets a small id once,
// kept in tm_series, so a stored sample is an id and a value. New series wait here until
// the commit that first uses them inserts them.
import type { Db } from "../storage/db.js";
import type { PackedSample } from "./delta-codec.js";
import type { StoredSnapshot } from "./sample-schema.js";
import type { Snapshot } from "./types.js";

export interface Series {
  id: number;
  device_id: string;
  metric: string;
}

export class SeriesMap {
  private byDevice = new Map<string, Map<string, number>>(); // device -> metric -> id
  private names = new Map<number, { device_id: string; metric: string }>();
  /** Series made since the last commit: inserted with the commit that first uses them. */
  unsaved: Series[] = [];
  private next = 1;

  /** The series as tm_series has them (at start). */
  reload(db: Db): void {
    this.byDevice.clear();
    this.names.clear();
    this.unsaved = [];
    this.next = 1;
    for (const r of db.prepare("SELECT id, device_id, metric FROM tm_series").all() as Series[]) {
      this.add(r);
      this.next = Math.max(this.next, r.id + 1);
    }
  }

  private add(s: Series): void {
    let byMetric = this.byDevice.get(s.device_id);
    if (!byMetric) this.byDevice.set(s.device_id, (byMetric = new Map()));
    byMetric.set(s.metric, s.id);
    this.names.set(s.id, { device_id: s.device_id, metric: s.metric });
  }

  private id(device_id: string, metric: string): number {
    let id = this.byDevice.get(device_id)?.get(metric);
    if (id === undefined) {
      const s = { id: this.next++, device_id, metric };
      this.add(s);
      this.unsaved.push(s);
      id = s.id;
    }
    return id;
  }

  /** A snapshot's numeric values as series ids and values. */
  pack(snapshot: Snapshot): PackedSample[] {
    const samples: PackedSample[] = [];
    for (const d of snapshot.devices) {
      for (const metric in d.metrics) {
        const value = d.metrics[metric];
        if (typeof value === "number") samples.push({ series: this.id(d.device_id, metric), value });
      }
    }
    return samples;
  }

  /** Stored samples as the readers see them: by device, metric to value. */
  view(id: number, ts: number, samples: readonly PackedSample[]): StoredSnapshot {
    const byDevice = new Map<string, Record<string, number>>();
    for (const s of samples) {
      const name = this.names.get(s.series);
      if (!name) continue;
      let m = byDevice.get(name.device_id);
      if (!m) byDevice.set(name.device_id, (m = {}));
      m[name.metric] = s.value;
    }
    return { id, ts, devices: [...byDevice].map(([device_id, metrics]) => ({ device_id, metrics })) };
  }
}
