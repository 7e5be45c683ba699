// `sitegate check-config`: loads and validates a config file, printing every problem by path.
import { CONFIG_OPTION, EXIT_OK, configFile, type Command } from "./command.js";
import { configWarnings, loadConfig } from "../load-config.js";
import { BUILTIN_DIR, siteProfiles } from "../profiles/registry.js";
import { unfinishedConfig, unfinishedLines } from "../config/unfinished.js";

const command: Command = {
  summary:
    "Validate a config file: list every problem by path (exit 2) or print a summary (exit 0), with warnings (a broken site profile no device of the file needs, a device_id kept as it is).",
  usage: "sitegate check-config [--config FILE]",
  options: CONFIG_OPTION,
  async run(values) {
    const file = configFile(values);
    const cfg = loadConfig(file);
    // `run` leaves a broken site profile out and starts: the check names it and passes,
    // unless a device of this file needs it (loadConfig refused that already).
    const profiles = siteProfiles(cfg.profiles_dir);
    const warnings = [...profiles.errors.map((e) => `${e.path}: site profile left out: ${e.message}`), ...configWarnings(cfg)];
    for (const w of warnings) process.stderr.write(`warning: ${w}\n`);
    // what init left as a placeholder: loud, by name, and still exit 0 (the unit's ExecStartPre runs this)
    const unfinished = unfinishedConfig(cfg);
    for (const w of unfinishedLines(unfinished)) process.stderr.write(`WARNING: ${w}\n`);
    if (unfinished.length)
      process.stderr.write(
        `WARNING: the config is unfinished (${unfinished.length} above): the gateway runs, and /healthz says degraded\n`,
      );
    const builtin = new Set(siteProfiles(undefined).names()).size;
    const lines = [
      `config ok: ${file}`,
      `  site_id:         ${cfg.site_id}`,
      `  organization_id: ${cfg.organization_id}`,
      `  api_version:     ${cfg.api_version}`,
      `  data_dir:        ${cfg.data_dir}`,
      `  http.listen:     https://${cfg.http.listen}`,
      `  users:           ${cfg.auth.users.length}, api keys: ${cfg.auth.api_keys.length}, allowlist: ${cfg.auth.ip_allowlist.join(", ")}`,
      `  execution_url:   ${cfg.partner.execution_url}`,
      `  data push:       ${cfg.partner.data_push_url.replace(/\/$/, "")}/${cfg.api_version}/${cfg.partner.data_push_path}`,
      `  rtu_ports:       ${
        Object.entries(cfg.rtu_ports)
          .map(([k, v]) => `${k}=${v.path} ${v.baud} 8${v.parity.charAt(0).toUpperCase()}${v.stop_bits}`)
          .join(", ") || "(none)"
      }`,
      `  poll interval:   ${cfg.telemetry.poll_interval_ms} ms, retention ${cfg.telemetry.retention_max_mb} MB`,
      `  devices:         ${cfg.devices.length}`,
      `  profiles:        ${builtin} built-in (${BUILTIN_DIR}), ${profiles.names().length - builtin} of the site (${cfg.profiles_dir})`,
    ];
    process.stdout.write(lines.join("\n") + "\n");
    return EXIT_OK;
  },
};
export default command;
