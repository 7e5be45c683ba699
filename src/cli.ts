#!/usr/bin/env node
// `sitegate` command. Exit codes: 0 ok, 1 runtime failure, 2 bad usage or bad config.
import "./node-guard.js";
import { realpathSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { errorMessage, isSitegateError } from "./errors.js";
import { developmentKeys, VERSION } from "./version.js";
import { errorText } from "./util/journal.js";
import { exitCode } from "./services/errors.js";
import { configProblemsText } from "./config/problem-text.js";
import { EXIT_FAILURE, EXIT_OK, EXIT_USAGE, UsageError, type Command } from "./cli/command.js";

/** Commands load lazily so `sitegate hash-secret` does not pay for fastify or modbus. */
const COMMANDS: Record<string, () => Promise<Command>> = {
  run: async () => (await import("./cli/run.js")).default,
  init: async () => (await import("./cli/init.js")).default,
  "check-config": async () => (await import("./cli/check-config.js")).default,
  "config-schema": async () => (await import("./cli/config-schema.js")).default,
  "hash-secret": async () => (await import("./cli/hash-secret.js")).default,
  read: async () => (await import("./cli/read.js")).default,
  scan: async () => (await import("./cli/scan.js")).default,
  dump: async () => (await import("./cli/dump.js")).default,
  probe: async () => (await import("./cli/probe.js")).default,
  outbox: async () => (await import("./cli/outbox.js")).default,
  update: async () => (await import("./cli/update.js")).default,
  events: async () => (await import("./cli/events.js")).default,
  fleet: async () => (await import("./cli/fleet.js")).default,
  token: async () => (await import("./cli/token.js")).default,
  devices: async () => (await import("./cli/devices.js")).default,
};

function help(): string {
  return [
    `sitegate ${VERSION}: the site controller runtime`,
    "",
    "usage: sitegate <command> [options]",
    "",
    "commands:",
    ...Object.keys(COMMANDS).map((c) => `  ${c}`),
    "",
    "`sitegate <command> --help` shows a command's options.",
  ].join("\n");
}

export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === "--help" || name === "-h" || name === "help") {
    process.stdout.write(help() + "\n");
    return name ? EXIT_OK : EXIT_USAGE;
  }
  if (name === "--version") {
    // the release, the Node.js running it (the release's own runtime under the unit) and the CPU
    process.stdout.write(`sitegate ${VERSION} node ${process.versions.node} (abi ${process.versions.modules}) linux-${process.arch}\n`);
    // A package built with `make deb DEV_UPDATE_KEY=1` trusts a key anyone with the source can have.
    const keysDir = process.env.SITEGATE_UPDATE_KEYS ?? "/etc/sitegate/update-keys";
    const dev = developmentKeys(keysDir);
    if (dev.length) process.stdout.write(`update key: development (${dev.map((n) => join(keysDir, n)).join(", ")}); not for a site\n`);
    return EXIT_OK;
  }
  const load = COMMANDS[name];
  if (!load) {
    process.stderr.write(errorText(`sitegate: unknown command "${name}"\n\n${help()}\n`));
    return EXIT_USAGE;
  }
  const cmd = await load();
  let parsed;
  try {
    parsed = parseArgs({
      args: rest,
      options: { ...cmd.options, help: { type: "boolean", short: "h" } },
      allowPositionals: true,
      strict: true,
    });
  } catch (e) {
    process.stderr.write(errorText(`sitegate ${name}: ${errorMessage(e)}\nusage: ${cmd.usage}\n`));
    return EXIT_USAGE;
  }
  if (parsed.values.help) {
    process.stdout.write(`${cmd.summary}\nusage: ${cmd.usage}\n`);
    return EXIT_OK;
  }
  try {
    return await cmd.run(parsed.values as Record<string, string | boolean | undefined>, parsed.positionals);
  } catch (e) {
    if (e instanceof UsageError) {
      process.stderr.write(errorText(`sitegate ${name}: ${e.message}\nusage: ${cmd.usage}\n`));
      return exitCode(e);
    }
    if (isSitegateError(e, "CONFIG_INVALID")) {
      process.stderr.write(errorText(`sitegate ${name}: ${e.message}\n${configProblemsText(e.details)}\n`));
      return exitCode(e);
    }
    process.stderr.write(errorText(`sitegate ${name}: ${errorMessage(e)}\n`));
    return exitCode(e);
  }
}

function isEntryPoint(): boolean {
  const argv1 = process.argv[1];
  if (!argv1) return false;
  if (import.meta.url === `file://${argv1}` || argv1.endsWith("/sitegate")) return true;
  try {
    return realpathSync(argv1) === fileURLToPath(import.meta.url);
  } catch {
    return false;
  }
}

// Run only when executed, not when imported by tests.
// Through a symlink too (/opt/sitegate/current/dist/src/cli.js runs a release directory).
if (isEntryPoint()) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (e) => {
      process.stderr.write(errorText(`sitegate: ${errorMessage(e)}\n`));
      process.exitCode = EXIT_FAILURE;
    },
  );
}
