// `sitegate events`: the dispatch timeline from the database, also while the daemon runs
// (a read-only connection beside the daemon's; WAL lets both work).
import { existsSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { CONFIG_OPTION, EXIT_FAILURE, EXIT_OK, UsageError, configFile, type Command } from "./command.js";
import { loadConfig } from "../load-config.js";
import { DB_FILE } from "../storage/db.js";
import { readEvents, type EventRow } from "../dispatch/store.js";
import { eventView } from "../dispatch/view.js";

const command: Command = {
  summary: "List dispatch events (partner and local schedules) with their state and result.",
  usage: "sitegate events [--config FILE] [--json] [--limit N]",
  options: { ...CONFIG_OPTION, json: { type: "boolean" }, limit: { type: "string" } },
  async run(values) {
    const limit = Number(values.limit ?? 200);
    if (!Number.isInteger(limit) || limit < 1) throw new UsageError("--limit must be a positive integer");
    const config = loadConfig(configFile(values));
    const file = join(config.data_dir, DB_FILE);
    if (!existsSync(file)) {
      process.stderr.write(`sitegate: no database at ${file} (has the gateway run with this config?)\n`);
      return EXIT_FAILURE;
    }
    const db = new Database(file, { readonly: true, fileMustExist: true });
    let rows: EventRow[];
    try {
      db.pragma("busy_timeout = 2000");
      rows = readEvents(db, limit);
    } finally {
      db.close();
    }
    const view = rows.map(eventView);
    if (values.json) {
      process.stdout.write(JSON.stringify(view, null, 2) + "\n");
      return EXIT_OK;
    }
    if (view.length === 0) {
      process.stdout.write("no events\n");
      return EXIT_OK;
    }
    const head = ["event_id", "source", "type", "quantity", "start_time", "end_time", "state", "result"];
    const status = (v: (typeof view)[number]) => String((v.result as { status?: string } | null)?.status ?? "-");
    const lines = view.map((v) => [
      v.event_id,
      v.source,
      v.mode === "test" ? `${v.event_type} (test)` : v.event_type,
      `${v.event_quantity} ${v.event_unit}`,
      v.start_time,
      v.end_time,
      v.state,
      status(v),
    ]);
    const widths = head.map((h, i) => Math.max(h.length, ...lines.map((l) => String(l[i]).length)));
    const fmt = (cols: string[]) =>
      cols
        .map((c, i) => String(c).padEnd(widths[i] ?? 0))
        .join("  ")
        .trimEnd();
    process.stdout.write([fmt(head), ...lines.map((l) => fmt(l.map(String)))].join("\n") + "\n");
    return EXIT_OK;
  },
};
export default command;
