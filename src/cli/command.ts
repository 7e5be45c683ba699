// What a `sitegate` subcommand is, and the exit codes and usage error they share. Its own
// module so src/cli.ts (which loads the commands) and src/cli/*.ts (the commands) do not
// import each other.
import type { ParseArgsConfig } from "node:util";
import { SitegateError } from "../errors.js";

export { EXIT_FAILURE, EXIT_USAGE } from "../services/errors.js";
export const EXIT_OK = 0;

/** Where every command that reads a config looks without --config (SITEGATE_CONFIG overrides). */
export const DEFAULT_CONFIG = process.env.SITEGATE_CONFIG ?? "/etc/sitegate/config.yaml";

/** The `--config FILE` option of every command that reads a config. */
export const CONFIG_OPTION = { config: { type: "string", short: "c" } } as const;

/** The config file a command reads: --config, or DEFAULT_CONFIG. */
export function configFile(values: Record<string, unknown>): string {
  return typeof values.config === "string" ? values.config : DEFAULT_CONFIG;
}

/** Bad usage: printed with the command's usage line, exit 2. */
export class UsageError extends SitegateError {
  constructor(message: string) {
    super("USAGE", message);
  }
}

export interface Command {
  summary: string;
  usage: string;
  options: NonNullable<ParseArgsConfig["options"]>;
  run(values: Record<string, string | boolean | undefined>, positionals: string[]): Promise<number>;
}
