// `sitegate outbox`: lists the callbacks waiting for the partner (the lanes of the
// delivery log's consumer `https`, the data-push backlog) and the dead letters; `sitegate outbox retry ID...|--all` puts dead
// letters back at the end of their lanes. Works while the daemon runs: it opens the same
// SQLite database (WAL), and the daemon's lanes re-check their queues every few seconds.
// The data-push backlog lives in telemetry.db, which the running daemon holds alone.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { CONFIG_OPTION, EXIT_FAILURE, EXIT_OK, UsageError, configFile, type Command } from "./command.js";
import { loadConfig } from "../load-config.js";
import Database from "better-sqlite3";
import { DB_FILE, TELEMETRY_DB_FILE, migrate, openDatabase, storageError, type Db } from "../storage/db.js";
import { withFullSync } from "../storage/durable.js";
import { DeliveryLog } from "../delivery/log.js";
import { HTTPS, UPLINK_MIGRATIONS } from "../uplink/callbacks.js";
import { pendingDataPush } from "../telemetry/sample-store.js";
import { SitegateError, isSitegateError } from "../errors.js";

function openDeliveryLog(configFile: string): { db: Db; log: DeliveryLog; dataDir: string } {
  const cfg = loadConfig(configFile);
  const path = join(cfg.data_dir, DB_FILE);
  if (!existsSync(path)) throw new SitegateError("NOT_FOUND", `no database at ${path}: the gateway has not run with this config yet`);
  const db = openDatabase(cfg.data_dir);
  migrate(db, [UPLINK_MIGRATIONS]);
  return { db, log: new DeliveryLog({ db }), dataDir: cfg.data_dir };
}

/** Snapshots after the push cursor, or null while the running daemon holds telemetry.db. */
function dataPushBacklog(dataDir: string): number | null {
  const path = join(dataDir, TELEMETRY_DB_FILE);
  if (!existsSync(path)) return 0;
  let db: Db | null = null;
  try {
    db = new Database(path, { readonly: true, fileMustExist: true });
    return pendingDataPush(db);
  } catch (e) {
    if (isSitegateError(storageError(e), "STORAGE_UNAVAILABLE")) return null;
    return 0; // no telemetry tables yet
  } finally {
    db?.close();
  }
}

function table(head: string[], rows: string[][]): string {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]?.length ?? 0)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i] ?? 0))
      .join("  ")
      .trimEnd();
  return [line(head), ...rows.map(line)].join("\n");
}

const short = (s: string | null, n = 60) => (s === null ? "" : s.length > n ? `${s.slice(0, n - 1)}…` : s);

/** `sitegate outbox retry ID...|--all`: dead letters back in their lanes. */
function retry(file: string, args: string[], all: boolean, json: boolean): number {
  if (all && args.length) throw new UsageError("give dead-letter ids or --all, not both");
  if (!all && args.length === 0) throw new UsageError("retry needs dead-letter ids (see `sitegate outbox`) or --all");
  const ids = args.map((a) => {
    if (!/^[1-9]\d{0,15}$/.test(a)) throw new UsageError(`"${a}" is not a dead-letter id (a positive integer)`);
    return Number(a);
  });
  const { db, log } = openDeliveryLog(file);
  try {
    const missing = ids.filter((id) => !log.getDeadLetter(HTTPS, id));
    if (missing.length) {
      process.stderr.write(`sitegate outbox: no dead letter with id ${missing.join(", ")} (see \`sitegate outbox\`)\n`);
      return EXIT_FAILURE;
    }
    // On the card before "put back" is printed (a power cut must not undo what was reported done).
    const n = withFullSync(db, () => log.retry(HTTPS, all ? "all" : ids));
    process.stdout.write(
      json
        ? JSON.stringify({ requeued: n }) + "\n"
        : `put ${n} dead letter(s) back in their lanes; the running gateway sends them within a few seconds\n`,
    );
    return EXIT_OK;
  } finally {
    db.close();
  }
}

/** `sitegate outbox [--json]`: the data-push backlog, pending callbacks and dead letters. */
function list(file: string, json: boolean): number {
  const { db, log, dataDir } = openDeliveryLog(file);
  try {
    const pending = log.pending(HTTPS);
    const dead = log.deadLetters(HTTPS);
    const backlog = dataPushBacklog(dataDir);
    if (json) {
      const view = (m: (typeof pending)[number]) => ({
        id: m.id,
        lane: m.lane,
        kind: m.kind,
        url: m.address,
        idempotency_key: m.idempotency_key,
        created_at: m.created_at,
        attempts: m.attempts,
        last_error: m.last_error,
        body: m.body,
      });
      const out = {
        data_push_backlog: backlog,
        pending: pending.map(view),
        dead_letters: dead.map((m) => ({ ...view(m), dead_at: m.dead_at })),
      };
      process.stdout.write(JSON.stringify(out) + "\n");
      return EXIT_OK;
    }
    const out = [
      backlog === null
        ? "data push backlog: held by the running gateway (its /metrics: sitegate_samples_pending_snapshots)"
        : `data push backlog: ${backlog} snapshot(s)`,
      "",
      `pending: ${pending.length}`,
    ];
    if (pending.length)
      out.push(
        table(
          ["id", "lane", "kind", "created_at", "attempts", "last_error"],
          pending.map((m) => [String(m.id), m.lane, m.kind, m.created_at, String(m.attempts), short(m.last_error)]),
        ),
      );
    out.push("", `dead letters: ${dead.length}${dead.length ? " (sitegate outbox retry ID|--all)" : ""}`);
    if (dead.length)
      out.push(
        table(
          ["id", "lane", "kind", "created_at", "dead_at", "attempts", "last_error"],
          dead.map((m) => [String(m.id), m.lane, m.kind, m.created_at, m.dead_at, String(m.attempts), short(m.last_error)]),
        ),
      );
    process.stdout.write(out.join("\n") + "\n");
    return EXIT_OK;
  } finally {
    db.close();
  }
}

const command: Command = {
  summary: "List pending callbacks and dead letters; `outbox retry ID...|--all` puts dead letters back in their lanes.",
  usage: "sitegate outbox [--config FILE] [--json] | sitegate outbox retry ID...|--all [--config FILE]",
  options: { ...CONFIG_OPTION, json: { type: "boolean" }, all: { type: "boolean" } },
  async run(values, positionals) {
    const file = configFile(values);
    const [sub, ...args] = positionals;
    if (sub !== undefined && sub !== "retry" && sub !== "list") throw new UsageError(`unknown subcommand "${sub}" (list or retry)`);
    if (sub === "retry") return retry(file, args, values.all === true, values.json === true);
    if (values.all || args.length) throw new UsageError("--all and ids belong to `sitegate outbox retry`");
    return list(file, values.json === true);
  },
};
export default command;
