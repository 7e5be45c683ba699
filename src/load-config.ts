// Loads the YAML config file, validates it, and reports every problem at once, by path and by
// its place in the file.
import { readFileSync } from "node:fs";
import { dirname, isAbsolute, resolve } from "node:path";
import { configSchema, type Config } from "./config/schema.js";
import { modbusBlockIssues } from "./modbus/config-rules.js";
import { siteProfiles } from "./profiles/registry.js";
import { isSitegateError, SitegateError, type ErrorDetail } from "./errors.js";
import { configIssues, expectedText } from "./config/issues.js";
import { ConfigSource, type ConfigProblem } from "./config/source.js";
import { parsedBlocks, unparsedDeviceIssues } from "./config/partial.js";
import { loadSecretFiles } from "./config/secret-files.js";
import { exampleSecretIssues } from "./config/example-secrets.js";
import { fileProblems } from "./config/file-checks.js";
import { configDeclaredDevices, deviceIdClashes, keptDeviceIdWarnings } from "./config/device-ids.js";

function resolveFrom(base: string, p: string): string {
  return isAbsolute(p) ? p : resolve(base, p);
}

type Block = keyof Config;

/** A rule the schema alone cannot state, and the blocks it reads: it runs when each of them parsed. */
interface Check {
  needs: Block[];
  run(cfg: Config, baseDir: string): ErrorDetail[];
}

function duplicateUsers(cfg: Config): ErrorDetail[] {
  const out: ErrorDetail[] = [];
  const users = new Set<string>();
  cfg.auth.users.forEach((u, i) => {
    if (users.has(u.username)) out.push({ path: `auth.users[${i}].username`, message: "duplicate username" });
    users.add(u.username);
  });
  return out;
}

const CHECKS: Check[] = [
  // The Modbus block's rules are the family's; a broken site profile is skipped, unless a device of this file needs one it might have been.
  {
    needs: ["organization_id", "devices", "rtu_ports", "profiles_dir"],
    run: (c) => modbusBlockIssues(c, siteProfiles(c.profiles_dir)),
  },
  // One device_id names one device, whatever its family: every entry enters, none is held yet.
  { needs: ["devices", "zigbee", "gpio"], run: (c) => deviceIdClashes([], configDeclaredDevices(c)) },
  { needs: ["auth"], run: duplicateUsers },
  { needs: ["http", "partner", "fleet", "zigbee"], run: fileProblems },
  { needs: ["partner", "fleet"], run: loadSecretFiles },
];

/** One scrypt per hash: only where a file is loaded (loadConfig), not for every config a test builds. */
const EXAMPLE_SECRETS_CHECK: Check = { needs: ["auth"], run: exampleSecretIssues };

/** Relative paths of the blocks that parsed, resolved against the config file's folder. */
function resolvePaths(cfg: Config, ok: Set<Block>, baseDir: string): void {
  if (ok.has("profiles_dir")) cfg.profiles_dir = resolveFrom(baseDir, cfg.profiles_dir);
  if (ok.has("data_dir")) cfg.data_dir = resolveFrom(baseDir, cfg.data_dir);
  if (ok.has("update")) cfg.update = { ...cfg.update, download_dir: resolveFrom(baseDir, cfg.update.download_dir) };
  if (ok.has("http")) {
    cfg.http.tls.cert = resolveFrom(baseDir, cfg.http.tls.cert);
    cfg.http.tls.key = resolveFrom(baseDir, cfg.http.tls.key);
  }
  if (ok.has("partner") && cfg.partner.ca_file) cfg.partner.ca_file = resolveFrom(baseDir, cfg.partner.ca_file);
  if (ok.has("fleet") && cfg.fleet)
    for (const k of ["ca_file", "cert_file", "key_file"] as const) if (cfg.fleet[k]) cfg.fleet[k] = resolveFrom(baseDir, cfg.fleet[k]);
  if (ok.has("zigbee") && cfg.zigbee?.ca_file) cfg.zigbee.ca_file = resolveFrom(baseDir, cfg.zigbee.ca_file);
  if (ok.has("rtu_ports"))
    for (const port of Object.values(cfg.rtu_ports)) {
      if (port.path.startsWith("./") || port.path.startsWith("../")) port.path = resolveFrom(baseDir, port.path);
    }
}

/**
 * Validates a parsed config object and lists every problem at once: the schema's, and
 * those of the rules beyond it on every block that parsed. Relative paths (data_dir, TLS
 * files, rtu ports under ./, partner.ca_file, the broker CA files) are resolved against
 * `baseDir`, the config file's folder. `exampleSecrets`: also refuse hashes of the
 * published example secrets (loadConfig).
 */
export function parseConfig(raw: unknown, baseDir: string, opts: { exampleSecrets?: boolean } = {}): Config {
  const input = (raw ?? {}) as Record<string, unknown>;
  const result = configSchema.safeParse(input, { reportInput: true, error: expectedText });
  const problems: ErrorDetail[] = result.success ? [] : configIssues(configSchema, result.error.issues);
  const { cfg, ok, devicePaths } = result.success
    ? { cfg: result.data, ok: new Set(Object.keys(configSchema.shape) as Block[]), devicePaths: undefined }
    : parsedBlocks(input);
  resolvePaths(cfg, ok, baseDir);
  for (const check of opts.exampleSecrets ? [...CHECKS, EXAMPLE_SECRETS_CHECK] : CHECKS)
    if (check.needs.every((b) => ok.has(b))) problems.push(...check.run(cfg, baseDir).map(devicePaths ?? ((d) => d)));
  if (devicePaths && ok.has("organization_id") && ok.has("profiles_dir"))
    problems.push(...unparsedDeviceIssues(input, cfg.organization_id, siteProfiles(cfg.profiles_dir)));
  if (problems.length) throw new SitegateError("CONFIG_INVALID", "config is invalid", { details: problems });
  return cfg;
}

/**
 * Reads, parses and validates the config file. Every problem says where it is in the file
 * (source.ts); a YAML syntax error stops before the schema, which would only echo it.
 */
export function loadConfig(file: string): Config {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (e) {
    throw new SitegateError("CONFIG_INVALID", `cannot read config file ${file}`, {
      details: [{ path: "(file)", message: (e as Error).message }],
    });
  }
  const source = new ConfigSource(file, text);
  if (source.doc.errors.length) {
    throw new SitegateError("CONFIG_INVALID", `config file ${file} is not valid YAML`, { details: source.syntaxProblems() });
  }
  try {
    return parseConfig(source.doc.toJS(), dirname(resolve(file)), { exampleSecrets: true });
  } catch (e) {
    if (!isSitegateError(e, "CONFIG_INVALID")) throw e;
    const located = e.details.map((d) => source.locate(d));
    // in the file's order; a problem without a place (a path no node of the file has) last, as found
    const order = (p: ConfigProblem) => (p.line === undefined ? Infinity : p.line * 1e4 + (p.column ?? 0));
    located.sort((a, b) => order(a) - order(b));
    throw new SitegateError("CONFIG_INVALID", e.message, { details: located });
  }
}

/**
 * What the config file holds that works but a new entry could not: a device_id outside
 * the charset of new ids (kept, so that no update stops a working site). check-config
 * prints these, `run` logs them.
 */
export function configWarnings(cfg: Config): string[] {
  return keptDeviceIdWarnings(configDeclaredDevices(cfg));
}
