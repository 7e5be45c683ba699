// `sitegate token list|revoke`: the partner API's bearer tokens. `revoke --all` ends every
// issued token, `revoke --user NAME` one user's. Works while the daemon runs: tokens live
// in the SQLite database (WAL) and the daemon looks each one up on every request, so a
// revoked token is refused from the next request on.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { CONFIG_OPTION, EXIT_OK, UsageError, configFile, type Command } from "./command.js";
import { loadConfig } from "../load-config.js";
import { DB_FILE, migrate, openDatabase, type Db } from "../storage/db.js";
import { AUTH_MIGRATIONS, revokeTokens, tokenCounts } from "../api/auth.js";
import { SitegateError } from "../errors.js";

function openTokens(configFile: string): Db {
  const cfg = loadConfig(configFile);
  const path = join(cfg.data_dir, DB_FILE);
  if (!existsSync(path)) throw new SitegateError("NOT_FOUND", `no database at ${path}: the gateway has not run with this config yet`);
  const db = openDatabase(cfg.data_dir);
  migrate(db, [AUTH_MIGRATIONS]);
  return db;
}

const command: Command = {
  summary: "List live API tokens per user; `token revoke --all|--user NAME` ends issued tokens (the running gateway refuses them at once).",
  usage: "sitegate token list --config FILE [--json] | sitegate token revoke --all|--user NAME --config FILE [--json]",
  options: { ...CONFIG_OPTION, json: { type: "boolean" }, all: { type: "boolean" }, user: { type: "string" } },
  async run(values, positionals) {
    const config = configFile(values);
    const [sub, ...extra] = positionals;
    if (extra.length) throw new UsageError(`unexpected argument "${extra[0]}"`);
    if (sub === "revoke") {
      if (values.all && values.user !== undefined) throw new UsageError("give --all or --user NAME, not both");
      if (!values.all && values.user === undefined) throw new UsageError("revoke needs --all or --user NAME");
      if (values.user === "") throw new UsageError("--user needs a username");
      const db = openTokens(config);
      try {
        const n = revokeTokens(db, values.all ? undefined : String(values.user));
        process.stdout.write(
          values.json
            ? JSON.stringify({ revoked: n }) + "\n"
            : `revoked ${n} token(s)${values.user !== undefined ? ` of ${String(values.user)}` : ""}\n`,
        );
        return EXIT_OK;
      } finally {
        db.close();
      }
    }
    if (sub !== undefined && sub !== "list") throw new UsageError(`unknown subcommand "${sub}" (list or revoke)`);
    if (values.all || values.user !== undefined) throw new UsageError("--all and --user belong to `sitegate token revoke`");
    const db = openTokens(config);
    try {
      const rows = tokenCounts(db, Date.now());
      if (values.json)
        process.stdout.write(
          JSON.stringify({ users: rows.map((r) => ({ ...r, last_issued_at: new Date(r.last_issued_at).toISOString() })) }) + "\n",
        );
      else if (rows.length === 0) process.stdout.write("no live tokens\n");
      else
        process.stdout.write(
          rows.map((r) => `${r.username}: ${r.tokens} live token(s), last issued ${new Date(r.last_issued_at).toISOString()}`).join("\n") +
            "\n",
        );
      return EXIT_OK;
    } finally {
      db.close();
    }
  },
};
export default command;
