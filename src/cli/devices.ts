// `sitegate devices release ID [--forget [--yes]]`: a device whose release did not read back
// (B4 "Closed loop": kept in the device ledger, retried with backoff). `release` asks the
// running gateway to try it at once; `--forget` drops the ledger row, for an operator who
// has put the device back by hand, after a confirmation (a prompt, or --yes). Both go
// through the running gateway: the command leaves its request in the database (WAL) and
// the gateway takes it at its next telemetry snapshot, logs it, and answers in the same row.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline/promises";
import { setTimeout as sleep } from "node:timers/promises";
import { CONFIG_OPTION, EXIT_FAILURE, EXIT_OK, UsageError, configFile, type Command } from "./command.js";
import { loadConfig } from "../load-config.js";
import { DB_FILE, migrate, openDatabase, type Db } from "../storage/db.js";
import { DISPATCH_MIGRATIONS } from "../dispatch/store.js";
import { askRelease, releaseRequest, type ReleaseAction } from "../dispatch/release-requests.js";
import { SitegateError } from "../errors.js";

const DEVICE_ID = /^[A-Za-z0-9._-]{1,64}$/;
/** How long the command waits for the gateway's answer (it takes a request at its next poll). */
const ANSWER_WAIT_MS = 20_000;
const ANSWER_POLL_MS = 200;

function openLedger(file: string): Db {
  const cfg = loadConfig(file);
  const path = join(cfg.data_dir, DB_FILE);
  if (!existsSync(path)) throw new SitegateError("NOT_FOUND", `no database at ${path}: the gateway has not run with this config yet`);
  const db = openDatabase(cfg.data_dir);
  migrate(db, [DISPATCH_MIGRATIONS]);
  return db;
}

async function confirmed(id: string, pre: string): Promise<boolean> {
  if (!process.stdin.isTTY) throw new UsageError("--forget asks for a confirmation: no terminal to ask on, pass --yes");
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    process.stderr.write(`device ${id}: its state before dispatch drove it was ${pre}\n`);
    const a = await rl.question(`drop its ledger row? The gateway will no longer put it back. Type "yes": `);
    return a.trim() === "yes";
  } finally {
    rl.close();
  }
}

/** The gateway's answer to request `reqId`, or null when none came within the wait. */
async function answerOf(db: Db, reqId: number): Promise<string | null> {
  for (let waited = 0; waited < ANSWER_WAIT_MS; waited += ANSWER_POLL_MS) {
    const q = releaseRequest(db, reqId);
    if (q?.answer && q.answer !== "taken") return q.answer;
    await sleep(ANSWER_POLL_MS);
  }
  return null;
}

async function release(file: string, id: string, action: ReleaseAction, yes: boolean, json: boolean): Promise<number> {
  const db = openLedger(file);
  try {
    const row = db.prepare("SELECT pre, unreleased FROM dp_ledger WHERE device_id = ?").get(id) as
      | { pre: string; unreleased: string | null }
      | undefined;
    if (!row) {
      const text = `device ${id}: ${action === "release" ? "released: the ledger holds nothing for it" : "the ledger holds nothing for it (nothing to forget)"}`;
      process.stdout.write(json ? JSON.stringify({ device_id: id, answer: text }) + "\n" : text + "\n");
      return action === "forget" ? EXIT_FAILURE : EXIT_OK;
    }
    if (action === "forget" && !yes && !(await confirmed(id, row.pre))) {
      process.stderr.write("not confirmed: the ledger row stays\n");
      return EXIT_FAILURE;
    }
    const reqId = askRelease(db, id, action, Date.now());
    const answer = await answerOf(db, reqId);
    if (answer === null) {
      process.stderr.write(
        `sitegate devices: no answer from the gateway within ${ANSWER_WAIT_MS / 1000} s; the request stays queued and the gateway takes it when it runs\n`,
      );
      return EXIT_FAILURE;
    }
    process.stdout.write(json ? JSON.stringify({ device_id: id, answer }) + "\n" : `device ${id}: ${answer}\n`);
    return answer.startsWith("released") || answer === "forgotten" ? EXIT_OK : EXIT_FAILURE;
  } finally {
    db.close();
  }
}

const command: Command = {
  summary:
    "`devices release ID` retries at once the release of a device that did not read it back; `--forget` drops its ledger row (after a confirmation, or --yes).",
  usage: "sitegate devices release ID [--forget [--yes]] --config FILE [--json]",
  options: { ...CONFIG_OPTION, json: { type: "boolean" }, forget: { type: "boolean" }, yes: { type: "boolean" } },
  async run(values, positionals) {
    const [sub, id, ...extra] = positionals;
    if (sub !== "release")
      throw new UsageError(sub === undefined ? "devices needs a subcommand: release ID" : `unknown subcommand "${sub}"`);
    if (id === undefined) throw new UsageError("release needs a device id");
    if (!DEVICE_ID.test(id)) throw new UsageError(`"${id}" is not a device id (letters, digits, . _ -, at most 64)`);
    if (extra.length) throw new UsageError(`unexpected argument "${extra[0]}"`);
    if (values.yes && !values.forget) throw new UsageError("--yes goes with --forget");
    return release(configFile(values), id, values.forget ? "forget" : "release", values.yes === true, values.json === true);
  },
};

export default command;
