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

interface CommandEntry {
  about: string;
  load: () => Promise<Command>;
}

/**
 * Commands load lazily so `sitegate hash-secret` does not pay for fastify or modbus; each
 * with the one line `sitegate --help` shows (`sitegate <command> --help`: its own summary).
 */
const COMMANDS: Record<string, CommandEntry> = {
  run: { about: "start the gateway daemon in the foreground", load: async () => (await import("./cli/run.js")).default },
  init: {
    about: "write a new config, a self-signed certificate and the partner's secrets",
    load: async () => (await import("./cli/init.js")).default,
  },
  "check-config": {
    about: "validate a config file: every problem by path, warnings for what is unfinished",
    load: async () => (await import("./cli/check-config.js")).default,
  },
  "config-schema": {
    about: "print the config file's JSON Schema (--markdown: the reference)",
    load: async () => (await import("./cli/config-schema.js")).default,
  },
  "hash-secret": {
    about: "hash a secret read on stdin for auth.users / auth.api_keys",
    load: async () => (await import("./cli/hash-secret.js")).default,
  },
  read: { about: "pair one Modbus device and print its decoded metrics", load: async () => (await import("./cli/read.js")).default },
  scan: {
    about: "probe a bus's unit ids and list who answers (--identify: which profile)",
    load: async () => (await import("./cli/scan.js")).default,
  },
  dump: {
    about: "capture every register a device's profile knows, for a bug report",
    load: async () => (await import("./cli/dump.js")).default,
  },
  probe: {
    about: "list which of a profile's points a device answers, lacks, or reads NaN or out of range",
    load: async () => (await import("./cli/probe.js")).default,
  },
  events: { about: "the dispatch events with their state and result", load: async () => (await import("./cli/events.js")).default },
  outbox: {
    about: "callbacks waiting for the partner and dead letters; retry them",
    load: async () => (await import("./cli/outbox.js")).default,
  },
  devices: {
    about: "retry a device's release, or forget its ledger row",
    load: async () => (await import("./cli/devices.js")).default,
  },
  token: { about: "list live API tokens, revoke them", load: async () => (await import("./cli/token.js")).default },
  update: {
    about: "signed over-the-air updates: keys, bundles, apply, status, rollback",
    load: async () => (await import("./cli/update.js")).default,
  },
  fleet: { about: "sign a fleet command with an ed25519 key", load: async () => (await import("./cli/fleet.js")).default },
};

function help(): string {
  const width = Math.max(...Object.keys(COMMANDS).map((c) => c.length));
  return [
    `sitegate ${VERSION}: the site controller runtime`,
    "",
    "usage: sitegate <command> [options]     sitegate --version     sitegate --help",
    "",
    "commands:",
    ...Object.entries(COMMANDS).map(([c, { about }]) => `  ${c.padEnd(width)}  ${about}`),
    "",
    "`sitegate <command> --help` shows a command's options. Commands that read a config take",
    "--config FILE (default /etc/sitegate/config.yaml).",
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
  const load = COMMANDS[name]?.load;
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
