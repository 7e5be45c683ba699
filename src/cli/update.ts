// `sitegate update keygen|bundle|apply|apply-request|check|status|rollback`: signed over-the-air releases.
// Exit codes: 0 ok, 1 runtime failure, 2 bad usage or a refused bundle.
import { closeSync, constants, existsSync, fchmodSync, lstatSync, mkdirSync, openSync, unlinkSync, writeSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { CONFIG_OPTION, EXIT_FAILURE, EXIT_OK, UsageError, configFile, type Command } from "./command.js";
import { exitCode } from "../services/errors.js";
import { BundleRefused, generateKeyPair, isValidVersion } from "../update/bundle-format.js";
import {
  applyBundle,
  checkUpdate,
  DEFAULT_KEYS_DIR,
  DEFAULT_MAX_BUNDLE_BYTES,
  DEFAULT_RESTART_CMD,
  DEFAULT_ROOT,
  recordRefused,
  requestRollback,
  updateStatus,
  type ApplyOptions,
} from "../update/install.js";
import { requestPolicyRefusal, takeUpdateRequest } from "../update/request.js";
import { errorMessage } from "../errors.js";
import { DEVELOPMENT_KEY_MARK } from "../version.js";

const USAGE = [
  "sitegate update keygen --out DIR [--name NAME] [--development]",
  "       sitegate update bundle --key FILE --out FILE [--arch ARCH] [--version V] [--node-modules DIR] [--runtime DIR]",
  "       sitegate update apply FILE|https://URL [--allow-downgrade] [--max-size BYTES] [--root DIR] [--keys DIR] [--config FILE] [--data-dir DIR] [--health-timeout S] [--max-starts N] [--restart-cmd CMD]",
  "       sitegate update apply-request [--config FILE] [--root DIR] [--keys DIR] [--data-dir DIR] [--restart-cmd CMD]   (the fleet's request, as root; the config's update block decides)",
  "       sitegate update check [--timer] [--root DIR] [--restart-cmd CMD]",
  "       sitegate update status [--json] [--root DIR]",
  "       sitegate update rollback [--root DIR] [--restart-cmd CMD]",
].join("\n");

const say = (line: string) => process.stdout.write(line + "\n");
const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);

function root(values: Record<string, unknown>): string {
  return resolve(str(values.root) ?? process.env.SITEGATE_ROOT ?? DEFAULT_ROOT);
}
function restartCmd(values: Record<string, unknown>): string {
  return str(values["restart-cmd"]) ?? process.env.SITEGATE_RESTART_CMD ?? DEFAULT_RESTART_CMD;
}
function positiveInt(v: unknown, name: string, dflt: number): number {
  if (v === undefined) return dflt;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new UsageError(`--${name} must be a positive integer`);
  return n;
}

async function dataDir(values: Record<string, unknown>): Promise<string> {
  const dir = str(values["data-dir"]) ?? process.env.SITEGATE_DATA_DIR;
  if (dir) return resolve(dir);
  const file = configFile(values);
  if (!existsSync(file)) throw new UsageError(`cannot find the data_dir: no config at ${file} (--config FILE or --data-dir DIR)`);
  const { loadConfig } = await import("../load-config.js");
  return loadConfig(file).data_dir;
}

/** The site's config the new release must accept: --config, or the default one when it exists. */
function siteConfig(values: Record<string, unknown>): string | undefined {
  const file = configFile(values);
  if (existsSync(file)) return resolve(file);
  if (typeof values.config === "string") throw new UsageError(`no config at ${file} (--config FILE)`);
  return undefined;
}

async function applyOptions(values: Record<string, unknown>): Promise<ApplyOptions> {
  return {
    root: root(values),
    config: siteConfig(values),
    keysDir: resolve(str(values.keys) ?? process.env.SITEGATE_UPDATE_KEYS ?? DEFAULT_KEYS_DIR),
    dataDir: await dataDir(values),
    allowDowngrade: values["allow-downgrade"] === true,
    healthTimeoutS: positiveInt(values["health-timeout"], "health-timeout", 300),
    maxStarts: positiveInt(values["max-starts"], "max-starts", 3),
    maxBytes: positiveInt(values["max-size"], "max-size", DEFAULT_MAX_BUNDLE_BYTES),
    restartCmd: restartCmd(values),
    say,
  };
}

/**
 * Run as root by sitegate-update-request.service when the fleet left a request: the config
 * decides what a request may ask for (update.allowed_urls, signed commands), whatever the
 * daemon that wrote the request checked.
 */
async function applyRequest(values: Record<string, unknown>): Promise<number> {
  const file = configFile(values);
  if (!existsSync(file)) throw new UsageError(`apply-request needs the config (update.allowed_urls): no config at ${file} (--config FILE)`);
  const { loadConfig } = await import("../load-config.js");
  const cfg = loadConfig(file);
  const o = await applyOptions({
    ...values,
    config: file,
    "data-dir": str(values["data-dir"]) ?? process.env.SITEGATE_DATA_DIR ?? cfg.data_dir,
  });
  const req = await takeUpdateRequest(o.dataDir);
  if (!req) {
    say("no update request");
    return EXIT_OK;
  }
  say(`fleet request: ${req.version} from ${req.url}`);
  try {
    const policy = requestPolicyRefusal(cfg, req.url);
    if (policy) throw new BundleRefused(`refused: ${policy.message}`);
    const r = await applyBundle(req.url, {
      ...o,
      allowDowngrade: false,
      maxBytes: Math.min(o.maxBytes ?? DEFAULT_MAX_BUNDLE_BYTES, cfg.update.max_bundle_mb * 1024 * 1024),
      expect: { sha256: req.sha256, version: req.version, size: req.size },
      allowedUrls: cfg.update.allowed_urls,
      downloadDir: cfg.update.download_dir,
    });
    say(`applied ${r.version}${r.previous ? ` (was ${r.previous}; rolled back unless healthy in time)` : ""}`);
  } catch (e) {
    recordRefused(o.root, req.version, errorMessage(e), o.dataDir);
    throw e instanceof BundleRefused ? e : new BundleRefused(`refused: ${errorMessage(e)}`);
  }
  return EXIT_OK;
}

const command: Command = {
  summary: "Over-the-air update: make keys and signed bundles, apply a bundle, gate it on health, roll back.",
  usage: USAGE,
  options: {
    out: { type: "string" },
    name: { type: "string" },
    key: { type: "string" },
    arch: { type: "string" },
    runtime: { type: "string" },
    version: { type: "string" },
    "node-modules": { type: "string" },
    root: { type: "string" },
    keys: { type: "string" },
    ...CONFIG_OPTION,
    "data-dir": { type: "string" },
    "allow-downgrade": { type: "boolean" },
    "max-size": { type: "string" },
    "health-timeout": { type: "string" },
    "max-starts": { type: "string" },
    "restart-cmd": { type: "string" },
    timer: { type: "boolean" },
    development: { type: "boolean" },
    json: { type: "boolean" },
  },
  async run(values, positionals) {
    const [sub, ...args] = positionals;
    try {
      switch (sub) {
        case "keygen":
          return keygen(values);
        case "bundle":
          return await bundle(values);
        case "apply": {
          const [source] = args;
          if (args.length !== 1 || source === undefined) throw new UsageError("apply takes one FILE or https:// URL");
          const r = await applyBundle(source, await applyOptions(values));
          say(`applied ${r.version}${r.previous ? ` (was ${r.previous}; rolled back unless healthy in time)` : ""}`);
          return EXIT_OK;
        }
        case "apply-request":
          if (args.length !== 0) throw new UsageError("apply-request takes no arguments");
          return await applyRequest(values);
        case "check": {
          const r = await checkUpdate({ root: root(values), timer: values.timer === true, restartCmd: restartCmd(values), say });
          if (r === "idle" && values.json) say(JSON.stringify({ result: r }));
          return EXIT_OK;
        }
        case "status": {
          const s = updateStatus(root(values));
          if (values.json) say(JSON.stringify(s));
          else {
            say(`current:  ${s.current ?? "(none)"}`);
            say(`previous: ${s.previous ?? "(none)"}`);
            say(`releases: ${s.releases.join(" ") || "(none)"}`);
            const p = s.pending;
            say(
              p
                ? `pending:  ${p.version} ${p.phase === "rollback" ? `rolling back (${p.reason})` : `${p.phase === "installing" ? "being installed" : p.healthy ? "healthy, kept at the next check" : "waiting for health"}; start ${p.starts} of ${p.max_starts}; deadline ${p.deadline_at}`}`
                : "pending:  none",
            );
            if (s.last) say(`last:     ${s.last.version} ${s.last.result} at ${s.last.at}${s.last.reason ? ` (${s.last.reason})` : ""}`);
          }
          return EXIT_OK;
        }
        case "rollback":
          await requestRollback({ root: root(values), restartCmd: restartCmd(values), say });
          return EXIT_OK;
        default:
          throw new UsageError(sub ? `unknown update command "${sub}"` : "which update command?");
      }
    } catch (e) {
      if (e instanceof BundleRefused) {
        process.stderr.write(`sitegate update ${sub}: ${e.message}\n`);
        return exitCode(e);
      }
      throw e;
    }
  },
};
export default command;

function keygen(values: Record<string, unknown>): number {
  const out = str(values.out);
  if (!out) throw new UsageError("keygen needs --out DIR");
  const name = str(values.name) ?? "sitegate-update";
  if (!/^[A-Za-z0-9._-]+$/.test(name) || name.startsWith("."))
    throw new UsageError(`--name ${name}: letters, digits, ".", "_" and "-" only`);
  const priv = join(out, `${name}.key`);
  const pub = join(out, `${name}.pub`);
  mkdirSync(out, { recursive: true, mode: 0o700 });
  if (!lstatSync(out).isDirectory()) throw new UsageError(`--out ${out} is not a folder`);
  const pair = generateKeyPair();
  const privatePem = pair.privatePem;
  // marked, so that a package or a controller that trusts it says so (sitegate --version)
  const publicPem = values.development === true ? `${DEVELOPMENT_KEY_MARK}\n${pair.publicPem}` : pair.publicPem;
  // O_EXCL|O_NOFOLLOW: never overwrite a key, never write through a symlink, dangling or not
  const created: string[] = [];
  try {
    for (const [file, pem, mode] of [
      [priv, privatePem, 0o600],
      [pub, publicPem, 0o644],
    ] as const) {
      let fd: number;
      try {
        fd = openSync(file, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, mode);
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code;
        if (code === "EEXIST" || code === "ELOOP") {
          const what = lstatSync(file).isSymbolicLink() ? "is a symbolic link" : "exists";
          process.stderr.write(`sitegate update keygen: ${file} ${what}; not overwriting a key\n`);
          for (const f of created) unlinkSync(f);
          return EXIT_FAILURE;
        }
        throw e;
      }
      created.push(file);
      try {
        fchmodSync(fd, mode); // whatever the umask
        const buf = Buffer.from(pem);
        let off = 0;
        while (off < buf.length) off += writeSync(fd, buf, off);
      } finally {
        closeSync(fd);
      }
    }
  } catch (e) {
    for (const f of created) unlinkSync(f);
    throw e;
  }
  say(`private key (signs bundles; keep it off the controllers): ${priv}`);
  say(`public key (copy to /etc/sitegate/update-keys/ on each controller): ${pub}`);
  return EXIT_OK;
}

async function bundle(values: Record<string, unknown>): Promise<number> {
  const keyFile = str(values.key);
  const out = str(values.out);
  if (!keyFile || !out) throw new UsageError("bundle needs --key FILE and --out FILE");
  const { loadPrivateKey } = await import("../update/bundle-format.js");
  const { stageRelease, packBundle, nodeMinFromEngines } = await import("../update/bundle.js");
  const { ALL_MIGRATIONS } = await import("../daemon.js");
  const { readFileSync, mkdtempSync, rmSync } = await import("node:fs");
  const { tmpdir } = await import("node:os");
  // the project this command was built from: dist/src/cli/update.js -> ../../..
  const projectDir = resolve(fileURLToPath(import.meta.url), "../../../..");
  const pkg = JSON.parse(readFileSync(join(projectDir, "package.json"), "utf8")) as { version: string; engines?: { node?: string } };
  const version = str(values.version) ?? pkg.version;
  if (!isValidVersion(version)) throw new UsageError(`--version ${version} is not x.y.z[-pre]`);
  const arch = str(values.arch) ?? process.arch;
  const stageDir = mkdtempSync(join(tmpdir(), "sitegate-stage-"));
  try {
    const node = stageRelease({
      projectDir,
      stageDir,
      arch,
      version,
      nodeModulesDir: str(values["node-modules"]),
      runtimeDir: str(values.runtime),
    });
    const migrations = Object.fromEntries(ALL_MIGRATIONS.map((m) => [m.module, Math.max(0, ...m.migrations.map((x) => x.version))]));
    const r = await packBundle({
      stageDir,
      version,
      arch,
      nodeMin: nodeMinFromEngines(pkg.engines?.node),
      node,
      migrations,
      privateKey: loadPrivateKey(keyFile),
      out: resolve(out),
    });
    say(
      `${r.file}: sitegate ${version} for linux-${arch}, ${node.runtime ? "with" : "without"} Node.js ${node.version} (ABI ${node.abi}), ${(r.size / 1048576).toFixed(1)} MiB, payload sha256 ${r.manifest.payload_sha256}`,
    );
    return EXIT_OK;
  } finally {
    rmSync(stageDir, { recursive: true, force: true });
  }
}
