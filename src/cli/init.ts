// `sitegate init`: writes a working config (default /etc/sitegate/config.yaml, mode 0640,
// root:sitegate when that group exists) with a self-signed certificate (or the paths of a
// given one), a fresh API key and partner password stored as scrypt hashes, the site and
// organization ids and the data dir. What only the partner knows and no flag gave stays an
// explicit placeholder (config/unfinished.ts), listed at the top of the file and on stderr.
// The clear secrets are printed once, as the lines `api_key: <value>` and `password:
// <value>`. It never overwrites: an existing config (or certificate it would make) is
// refused before anything is written.
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import {
  chmodSync,
  chownSync,
  closeSync,
  existsSync,
  fsyncSync,
  linkSync,
  mkdirSync,
  openSync,
  renameSync,
  rmSync,
  writeSync,
} from "node:fs";
import { hostname } from "node:os";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline/promises";
import { stringify } from "yaml";
import { CONFIG_OPTION, EXIT_OK, UsageError, configFile, type Command } from "./command.js";
import { parseConfig } from "../load-config.js";
import { SitegateError, isSitegateError } from "../errors.js";
import { hashSecret } from "../util/secret-hash.js";
import { PLACEHOLDER_ORGANIZATION_ID, PLACEHOLDER_PARTNER_URL, unfinishedConfig, unfinishedLines } from "../config/unfinished.js";

export interface InitAnswers {
  siteId: string;
  organizationId: string;
  listen: string;
  dataDir: string;
  executionUrl: string;
  dataPushUrl: string;
  /** a given certificate and key; both absent: a self-signed pair is made next to the config */
  certFile?: string;
  keyFile?: string;
}

/** The group that may read the config (the daemon's), or null when this machine has none. */
function sitegateGid(): number | null {
  try {
    const gid = Number(execFileSync("getent", ["group", "sitegate"], { encoding: "utf8" }).split(":")[2]);
    return Number.isInteger(gid) ? gid : null;
  } catch {
    return null;
  }
}

/** Writes `data` to `file` only if it does not exist yet (temp file, fsync, then a hard link that cannot replace). */
function writeNew(file: string, data: string, mode: number, gid: number | null): void {
  const tmp = `${file}.init-${randomBytes(4).toString("hex")}`;
  const fd = openSync(tmp, "wx", mode);
  try {
    writeSync(fd, data);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  try {
    chmodSync(tmp, mode);
    if (gid !== null && process.getuid?.() === 0) chownSync(tmp, 0, gid);
    linkSync(tmp, file); // fails with EEXIST instead of replacing a config written meanwhile
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "EEXIST") throw new UsageError(`refused: ${file} exists (sitegate init never overwrites)`);
    throw e;
  } finally {
    rmSync(tmp, { force: true });
  }
}

function selfSignedCert(certFile: string, keyFile: string, siteId: string, gid: number | null): void {
  const dir = dirname(certFile);
  const work = join(dir, `.init-tls-${randomBytes(4).toString("hex")}`);
  mkdirSync(work, { mode: 0o750 });
  try {
    const host = hostname();
    execFileSync(
      "openssl",
      [
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-keyout",
        join(work, "key.pem"),
        "-out",
        join(work, "cert.pem"),
        "-days",
        "3650",
        "-subj",
        `/CN=${siteId}`,
        "-addext",
        `subjectAltName=DNS:${host},DNS:localhost,IP:127.0.0.1,IP:::1`,
      ],
      { stdio: ["ignore", "ignore", "pipe"] },
    );
    chmodSync(join(work, "cert.pem"), 0o644);
    chmodSync(join(work, "key.pem"), 0o640);
    if (gid !== null && process.getuid?.() === 0) chownSync(join(work, "key.pem"), 0, gid);
    renameSync(join(work, "key.pem"), keyFile);
    renameSync(join(work, "cert.pem"), certFile);
  } catch (e) {
    const err = e as { stderr?: Buffer; message: string };
    throw new SitegateError("UNAVAILABLE", `openssl could not make the certificate: ${err.stderr?.toString().trim() || err.message}`);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/** The config init writes, before the certificate exists (paths only). */
export function initConfig(
  a: InitAnswers,
  tls: { cert: string; key: string },
  hashes: { password: string; apiKey: string },
): Record<string, unknown> {
  return {
    site_id: a.siteId,
    organization_id: a.organizationId,
    data_dir: a.dataDir,
    log_level: "info",
    http: { listen: a.listen, tls },
    auth: {
      client_id: "partner-portal",
      users: [{ username: "partner", password_hash: hashes.password }],
      api_keys: [{ name: "partner", key_hash: hashes.apiKey }],
      ip_allowlist: ["127.0.0.1/32", "::1/128"],
    },
    partner: { execution_url: a.executionUrl, data_push_url: a.dataPushUrl },
    devices: [],
  };
}

async function ask(a: InitAnswers): Promise<InitAnswers> {
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    const q = async (label: string, def: string) => (await rl.question(`${label} [${def}]: `)).trim() || def;
    return {
      ...a,
      siteId: await q("site id", a.siteId),
      organizationId: await q("organization id (UUID)", a.organizationId),
      listen: await q("partner API listens on HOST:PORT", a.listen),
      dataDir: await q("data dir", a.dataDir),
      executionUrl: await q("partner execution URL (https)", a.executionUrl),
      dataPushUrl: await q("partner data push URL (https)", a.dataPushUrl),
    };
  } finally {
    rl.close();
  }
}

const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);

const command: Command = {
  summary:
    "Write a working config with a self-signed certificate and fresh, hashed partner secrets (printed once); what only the partner knows (organization id, URLs, addresses) stays a placeholder that check-config names. Never overwrites.",
  usage:
    "sitegate init [--config FILE] [--non-interactive] [--site-id ID] [--organization-id UUID] [--listen HOST:PORT] [--data-dir DIR]\n" +
    "                     [--execution-url URL] [--data-push-url URL] [--cert FILE --key FILE]",
  options: {
    ...CONFIG_OPTION,
    "non-interactive": { type: "boolean" },
    "site-id": { type: "string" },
    "organization-id": { type: "string" },
    listen: { type: "string" },
    "data-dir": { type: "string" },
    "execution-url": { type: "string" },
    "data-push-url": { type: "string" },
    cert: { type: "string" },
    key: { type: "string" },
  },
  async run(values) {
    const file = resolve(configFile(values));
    if (existsSync(file))
      throw new UsageError(`refused: ${file} exists (sitegate init never overwrites; remove it first or pass --config FILE)`);
    if ((values.cert === undefined) !== (values.key === undefined)) throw new UsageError("--cert and --key go together");
    let a: InitAnswers = {
      siteId: str(values["site-id"]) ?? hostname(),
      // What only the partner knows stays an explicit placeholder (the nil UUID, partner.invalid):
      // check-config and run warn about each by name, and /healthz says degraded, until it is set.
      organizationId: str(values["organization-id"]) ?? PLACEHOLDER_ORGANIZATION_ID,
      // Every interface: the partner's network and the box's address are not known here (and
      // DHCP may change the address); the allowlist and the connection limits are the gates.
      // Why not loopback or one address: docs/security.md ("Where the API listens").
      listen: str(values.listen) ?? "0.0.0.0:8443",
      dataDir: resolve(str(values["data-dir"]) ?? "/var/lib/sitegate"),
      executionUrl: str(values["execution-url"]) ?? `${PLACEHOLDER_PARTNER_URL}/exec`,
      dataPushUrl: str(values["data-push-url"]) ?? PLACEHOLDER_PARTNER_URL,
      certFile: str(values.cert) && resolve(str(values.cert)!),
      keyFile: str(values.key) && resolve(str(values.key)!),
    };
    if (values["non-interactive"] !== true) {
      if (!process.stdin.isTTY) throw new UsageError("no terminal to ask on: pass --non-interactive (and the flags you need)");
      a = await ask(a);
    }
    const dir = dirname(file);
    const tls =
      a.certFile && a.keyFile
        ? { cert: a.certFile, key: a.keyFile }
        : { cert: join(dir, "tls", "cert.pem"), key: join(dir, "tls", "key.pem") };
    const made = !a.certFile;
    if (made && (existsSync(tls.cert) || existsSync(tls.key)))
      throw new UsageError(`refused: ${tls.cert} or ${tls.key} exists (pass --cert FILE --key FILE to use them)`);
    if (!made && !(existsSync(tls.cert) && existsSync(tls.key)))
      throw new UsageError(`--cert ${tls.cert} / --key ${tls.key}: no such file`);
    const apiKey = randomBytes(24).toString("base64url");
    const password = randomBytes(18).toString("base64url");
    const cfg = initConfig(a, tls, { password: hashSecret(password), apiKey: hashSecret(apiKey) });
    // every flag is checked by the config's own schema before anything is written (the
    // certificate init is about to make cannot be read yet: only that is let through)
    try {
      parseConfig(cfg, dir);
    } catch (e) {
      const tlsOnly =
        made && isSitegateError(e, "CONFIG_INVALID") && e.details.every((d) => d.path === "http.tls.cert" || d.path === "http.tls.key");
      if (!tlsOnly) throw e;
    }

    const gid = sitegateGid();
    mkdirSync(dir, { recursive: true, mode: 0o755 });
    if (made) {
      mkdirSync(dirname(tls.cert), { recursive: true, mode: 0o755 });
      selfSignedCert(tls.cert, tls.key, a.siteId, gid);
    }
    const todo = unfinishedLines(unfinishedConfig(parseConfig(cfg, dir)));
    const header =
      `# Written by \`sitegate init\` on ${new Date().toISOString()}. Reference: docs/configuration.md.\n` +
      (todo.length
        ? `# Still to set for the site (placeholders; sitegate check-config names them):\n${todo.map((t) => `#   ${t}\n`).join("")}`
        : "");
    writeNew(file, header + stringify(cfg), 0o640, gid);
    if (gid === null) process.stderr.write(`note: no group "sitegate" on this machine; ${file} is mode 0640 for its owner only\n`);
    process.stdout.write(
      [
        `wrote ${file} (mode 0640${gid !== null ? ", root:sitegate" : ""})`,
        made ? `certificate ${tls.cert} (self-signed, 10 years), key ${tls.key}` : `certificate ${tls.cert}, key ${tls.key}`,
        `site_id: ${a.siteId}`,
        `organization_id: ${a.organizationId}`,
        "The partner's secrets, shown this once (only their hashes are stored):",
        `api_key: ${apiKey}`,
        `password: ${password}`,
        "",
      ].join("\n"),
    );
    for (const t of todo) process.stderr.write(`WARNING: ${t}\n`);
    return EXIT_OK;
  },
};
export default command;
