// Telemetry kept in sitegate.db by releases before telemetry.db: moved over once, at start.
import type { Logger } from "../log.js";
import { forgetMigrations, type Db } from "../storage/db.js";
import { packSamples, unpackSamples } from "./sample-codec.js";

const TELEMETRY_TABLES = ["tm_snapshot", "tm_series", "tm_state"];
const TELEMETRY_MODULE = "telemetry";

/**
 * Releases before telemetry.db kept the telemetry buffer in sitegate.db (schema version 1).
 * The first time, its rows move over with their ids and cursor, in one transaction of
 * telemetry.db marked `imported`. Should they appear again (a rollback to such a release
 * ran for a while), its unsent rows are appended after the newest id. Then the old tables
 * go. A crash in between moves nothing twice.
 */
export function moveTelemetry(main: Db, tele: Db, log: Logger): void {
  const old = main.prepare("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'tm_snapshot'").pluck().get() as number;
  if (!old) return;
  const imported = tele.prepare("SELECT value FROM tm_state WHERE key = 'imported'").pluck().get() as number | undefined;
  tele.prepare("ATTACH DATABASE ? AS old").run(main.name);
  try {
    tele.transaction(() => {
      if (!imported) {
        tele.exec(`
          INSERT INTO main.tm_series (id, device_id, metric) SELECT id, device_id, metric FROM old.tm_series;
          INSERT INTO main.tm_snapshot (id, ts, n, data) SELECT id, ts, n, data FROM old.tm_snapshot;
          INSERT INTO main.tm_state (key, value) SELECT key, value FROM old.tm_state WHERE true
            ON CONFLICT (key) DO UPDATE SET value = excluded.value;
          INSERT INTO main.tm_state (key, value) VALUES ('last_id', max((SELECT coalesce(max(seq), 0) FROM old.sqlite_sequence WHERE name = 'tm_snapshot'), (SELECT coalesce(max(id), 0) FROM old.tm_snapshot)))
            ON CONFLICT (key) DO UPDATE SET value = excluded.value;
          INSERT INTO main.tm_state (key, value) VALUES ('imported', 1);
        `);
        return;
      }
      // Series by name (ids may differ), rows as packed alone with their series renumbered.
      const ids = new Map<number, number>();
      const find = tele.prepare("SELECT id FROM main.tm_series WHERE device_id = ? AND metric = ?").pluck();
      const add = tele.prepare(
        "INSERT INTO main.tm_series (id, device_id, metric) VALUES ((SELECT coalesce(max(id), 0) + 1 FROM main.tm_series), ?, ?)",
      );
      for (const r of tele.prepare("SELECT id, device_id, metric FROM old.tm_series").all() as Array<{
        id: number;
        device_id: string;
        metric: string;
      }>) {
        ids.set(r.id, (find.get(r.device_id, r.metric) as number | undefined) ?? Number(add.run(r.device_id, r.metric).lastInsertRowid));
      }
      const sentOld = (tele.prepare("SELECT value FROM old.tm_state WHERE key = 'push_cursor'").pluck().get() as number | undefined) ?? 0;
      let last = Math.max(
        tele.prepare("SELECT coalesce(max(id), 0) FROM main.tm_snapshot").pluck().get() as number,
        (tele.prepare("SELECT value FROM main.tm_state WHERE key = 'last_id'").pluck().get() as number | undefined) ?? 0,
      );
      const insert = tele.prepare("INSERT INTO main.tm_snapshot (id, ts, n, data) VALUES (?, ?, ?, ?)");
      for (const r of tele.prepare("SELECT ts, n, data FROM old.tm_snapshot WHERE id > ? ORDER BY id").all(sentOld) as Array<{
        ts: number;
        n: number;
        data: Buffer;
      }>) {
        const samples = unpackSamples(r.data).map((x) => ({ series: ids.get(x.series) ?? x.series, value: x.value }));
        insert.run(++last, r.ts, r.n, packSamples(samples));
      }
      tele
        .prepare("INSERT INTO main.tm_state (key, value) VALUES ('last_id', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value")
        .run(last);
    })();
  } finally {
    tele.exec("DETACH DATABASE old");
  }
  main.transaction(() => {
    for (const t of TELEMETRY_TABLES) main.exec(`DROP TABLE IF EXISTS ${t}`);
    forgetMigrations(main, TELEMETRY_MODULE);
  })();
  log.info({ from: main.name, to: tele.name, again: Boolean(imported) }, "telemetry buffer moved to its own database");
}
