// Loads the YAML config file, validates it, and reports every problem at once by path.
import { readFileSync } from "node:fs";
import { dirname, isAbsolute, resolve } from "node:path";
import { parseDocument } from "yaml";
import { configSchema, type Config } from "./config/schema.js";
import { modbusBlockIssues } from "./modbus/config-rules.js";
import { siteProfiles } from "./profiles/registry.js";
import { SitegateError, type ErrorDetail } from "./errors.js";
import { issuesToDetails } from "./util/zod-issues.js";
import { loadSecretFiles } from "./config/secret-files.js";
import { exampleSecretIssues } from "./config/example-secrets.js";
import { fileProblems } from "./config/file-checks.js";
import { configDeclaredDevices, deviceIdClashes, keptDeviceIdWarnings } from "./config/device-ids.js";

function resolveFrom(base: string, p: string): string {
  return isAbsolute(p) ? p : resolve(base, p);
}

/** Cross-field rules the schema alone cannot state. */
function crossChecks(cfg: Config): ErrorDetail[] {
  // The Modbus block's rules are the family's; a broken site profile is skipped, unless a device of this file needs one it might have been.
  const out = modbusBlockIssues(cfg, siteProfiles(cfg.profiles_dir));
  // One device_id names one device, whatever its family: every entry enters, none is held yet.
  out.push(...deviceIdClashes([], configDeclaredDevices(cfg)));
  const users = new Set<string>();
  cfg.auth.users.forEach((u, i) => {
    if (users.has(u.username)) out.push({ path: `auth.users[${i}].username`, message: "duplicate username" });
    users.add(u.username);
  });
  return out;
}

/**
 * Validates a parsed config object. Relative paths (data_dir, TLS files, rtu ports under
 * ./, partner.ca_file, the broker CA files) are resolved against `baseDir`, the config file's folder.
 */
export function parseConfig(raw: unknown, baseDir: string): Config {
  const result = configSchema.safeParse(raw ?? {});
  if (!result.success) {
    throw new SitegateError("CONFIG_INVALID", "config is invalid", { details: issuesToDetails(result.error.issues) });
  }
  const cfg = result.data;
  cfg.profiles_dir = resolveFrom(baseDir, cfg.profiles_dir);
  const cross = crossChecks(cfg);
  if (cross.length) throw new SitegateError("CONFIG_INVALID", "config is invalid", { details: cross });
  cfg.data_dir = resolveFrom(baseDir, cfg.data_dir);
  cfg.update = { ...cfg.update, download_dir: resolveFrom(baseDir, cfg.update.download_dir) };
  cfg.http.tls.cert = resolveFrom(baseDir, cfg.http.tls.cert);
  cfg.http.tls.key = resolveFrom(baseDir, cfg.http.tls.key);
  if (cfg.partner.ca_file) cfg.partner.ca_file = resolveFrom(baseDir, cfg.partner.ca_file);
  if (cfg.fleet)
    for (const k of ["ca_file", "cert_file", "key_file"] as const) if (cfg.fleet[k]) cfg.fleet[k] = resolveFrom(baseDir, cfg.fleet[k]);
  if (cfg.zigbee?.ca_file) cfg.zigbee.ca_file = resolveFrom(baseDir, cfg.zigbee.ca_file);
  for (const port of Object.values(cfg.rtu_ports)) {
    if (port.path.startsWith("./") || port.path.startsWith("../")) port.path = resolveFrom(baseDir, port.path);
  }
  const missing = fileProblems(cfg);
  missing.push(...loadSecretFiles(cfg, baseDir));
  if (missing.length) throw new SitegateError("CONFIG_INVALID", "config is invalid", { details: missing });
  return cfg;
}

export function loadConfig(file: string): Config {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (e) {
    throw new SitegateError("CONFIG_INVALID", `cannot read config file ${file}`, {
      details: [{ path: "(file)", message: (e as Error).message }],
    });
  }
  const doc = parseDocument(text, { prettyErrors: true, uniqueKeys: true });
  if (doc.errors.length) {
    throw new SitegateError("CONFIG_INVALID", `config file ${file} is not valid YAML`, {
      details: doc.errors.map((e) => ({ path: "(yaml)", message: e.message.split("\n")[0] ?? e.message })),
    });
  }
  const cfg = parseConfig(doc.toJS(), dirname(resolve(file)));
  const examples = exampleSecretIssues(cfg);
  if (examples.length) throw new SitegateError("CONFIG_INVALID", "config is invalid", { details: examples });
  return cfg;
}

/**
 * What the config file holds that works but a new entry could not: a device_id outside
 * the charset of new ids (kept, so that no update stops a working site). check-config
 * prints these, `run` logs them.
 */
export function configWarnings(cfg: Config): string[] {
  return keptDeviceIdWarnings(configDeclaredDevices(cfg));
}
