// Over-the-air update tests: fake releases (a tiny entry script that becomes healthy,
// crashes, or hangs), signed bundles of them, the `sitegate update` CLI as a child process,
// and FakeService, which does for a release root what systemd does for the unit: runs
// `sitegate update check` before every start (ExecStartPre) and restarts the entry on exit
// (Restart=always).
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { createHash, generateKeyPairSync, randomBytes, type KeyObject } from "node:crypto";
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  watch,
  writeFileSync,
  type FSWatcher,
} from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { packBundle } from "../../src/update/bundle.js";
import { withTmpDir } from "./tmp.js";
import { encodeBundleHeader, type Manifest } from "../../src/update/bundle-format.js";
import type { ConfigInput, UpdateConfig } from "../../src/config/schema.js";
import { stringify } from "yaml";
import { testConfigInput } from "./config.js";

export const CLI = resolve(fileURLToPath(import.meta.url), "../../../src/cli.js");

export interface Keys {
  privateKey: KeyObject;
  trustDir: string;
}

export function makeKeys(dir: string, name = "test"): Keys {
  const { publicKey, privateKey } = generateKeyPairSync("ed25519");
  const trustDir = join(dir, `trust-${name}`);
  mkdirSync(trustDir, { recursive: true });
  writeFileSync(join(trustDir, `${name}.pub`), publicKey.export({ type: "spki", format: "pem" }));
  return { privateKey, trustDir };
}

export type FakeMode = "healthy" | "crash" | "hang";

/**
 * A release directory whose dist/src/cli.js is a tiny program: it logs each start to
 * <FAKE_DATA_DIR>/starts.log, writes <FAKE_DATA_DIR>/serving, and then, by mode, writes its
 * health marker and runs, exits 1 (after changing the database when FAKE_SQLITE is set), or
 * runs without ever becoming healthy. Its `check-config --config FILE` leaves
 * FILE.checked-by-<version> (with its uid) and accepts the file, unless `configNeeds` names a
 * top-level key the file lacks: then it says so on stderr and exits 2, as check-config does.
 */
export function stageFakeRelease(
  dir: string,
  version: string,
  mode: FakeMode,
  padFiles = 0,
  extraFiles: Record<string, string> = {},
  configNeeds?: string,
): void {
  mkdirSync(join(dir, "dist", "src"), { recursive: true });
  writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "sitegate", version, type: "module" }));
  writeFileSync(
    join(dir, "dist", "src", "cli.js"),
    `import { appendFileSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
const VERSION = ${JSON.stringify(version)}, MODE = ${JSON.stringify(mode)};
if (process.argv[2] === "--version") { console.log(VERSION); process.exit(0); }
if (process.argv[2] === "check-config") {
  const file = process.argv[process.argv.indexOf("--config") + 1];
  const text = readFileSync(file, "utf8");
  try { writeFileSync(file + ".checked-by-" + VERSION, String(process.getuid())); } catch {}
  const needs = ${JSON.stringify(configNeeds ?? null)};
  if (needs !== null && !new RegExp("^" + needs + ":", "m").test(text)) {
    process.stderr.write("config " + file + " is invalid:\\n  " + needs + ": Required (release " + VERSION + ")\\n");
    process.exit(2);
  }
  console.log("config ok: " + file);
  process.exit(0);
}
const data = process.env.FAKE_DATA_DIR;
appendFileSync(join(data, "starts.log"), VERSION + "\\n");
writeFileSync(join(data, "serving"), VERSION);
if (MODE === "crash") {
  if (process.env.FAKE_SQLITE) {
    const Database = createRequire(import.meta.url)(process.env.FAKE_SQLITE);
    const db = new Database(join(data, "sitegate.db"));
    db.exec("CREATE TABLE IF NOT EXISTS added_by_new (x); UPDATE old_data SET v = 'changed by " + VERSION + "'");
    db.prepare("INSERT OR IGNORE INTO schema_migrations (module, version, applied_at) VALUES ('zz_new', 1, 'now')").run();
    db.close();
  }
  process.exit(1);
}
if (MODE === "healthy") {
  mkdirSync(join(data, "update"), { recursive: true });
  writeFileSync(join(data, "update", "healthy-" + VERSION), JSON.stringify({ version: VERSION }));
}
process.on("SIGTERM", () => process.exit(0));
setInterval(() => {}, 1 << 30);
`,
  );
  for (const [name, text] of Object.entries(extraFiles)) writeFileSync(join(dir, name), text);
  // incompressible padding, so that unpacking takes a while and can be caught half-way
  if (padFiles > 0) {
    mkdirSync(join(dir, "pad"));
    for (let i = 0; i < padFiles; i++) writeFileSync(join(dir, "pad", `f${i}`), randomBytes(32 * 1024));
  }
}

export interface FakeBundleOptions {
  version: string;
  mode: FakeMode;
  key: KeyObject;
  out: string;
  arch?: string;
  migrations?: Record<string, number>;
  padFiles?: number;
  nodeMin?: string;
  /** more files at the top of the release: name -> content */
  extraFiles?: Record<string, string>;
  /** the Node.js the manifest says the release is for (default: this node, no runtime) */
  node?: { version: string; abi: string; runtime: boolean };
  /** a top-level config key the release's check-config requires (its schema refuses a config without it) */
  configNeeds?: string;
}

export async function fakeBundle(o: FakeBundleOptions): Promise<string> {
  const stage = mkdtempSync(join(tmpdir(), "sitegate-fake-"));
  try {
    stageFakeRelease(stage, o.version, o.mode, o.padFiles ?? 0, o.extraFiles, o.configNeeds);
    await packBundle({
      stageDir: stage,
      version: o.version,
      arch: o.arch ?? process.arch,
      nodeMin: o.nodeMin ?? "20.0.0",
      node: o.node,
      migrations: o.migrations ?? {},
      privateKey: o.key,
      out: o.out,
    });
    return o.out;
  } finally {
    rmSync(stage, { recursive: true, force: true });
  }
}

export interface UpdateEnv {
  root: string;
  dataDir: string;
  keys: Keys;
  /** the restart command apply/rollback/check run: SIGTERM to the FakeService's child */
  restartCmd: string;
}

export function updateEnv(dir: string, keys: Keys): UpdateEnv {
  const dataDir = join(dir, "data");
  mkdirSync(dataDir, { recursive: true });
  return {
    root: join(dir, "root"),
    dataDir,
    keys,
    restartCmd: `kill -TERM "$(cat '${join(dataDir, "service.pid")}' 2>/dev/null)" 2>/dev/null; true`,
  };
}

/** The environment `sitegate update` runs in against the env's root, keys and data dir. */
export function updateCliEnv(env: UpdateEnv, restartCmd: string, extraEnv: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    ...process.env,
    SITEGATE_ROOT: env.root,
    SITEGATE_UPDATE_KEYS: env.keys.trustDir,
    SITEGATE_DATA_DIR: env.dataDir,
    SITEGATE_RESTART_CMD: restartCmd,
    ...extraEnv,
  };
}

/** Runs `sitegate update <args>` against the env's root and data dir. */
export function update(env: UpdateEnv, args: string[], extraEnv: Record<string, string> = {}) {
  return spawnSync(process.execPath, [CLI, "update", ...args], { encoding: "utf8", env: updateCliEnv(env, env.restartCmd, extraEnv) });
}

/** The state of an install root as comparable text: every path, its type, link target or size and mtime. */
export function snapshotTree(root: string): string {
  const out: string[] = [];
  const walk = (d: string, rel: string) => {
    if (!existsSync(d)) return;
    for (const name of readdirSync(d).sort()) {
      const p = join(d, name);
      const st = lstatSync(p);
      const r = rel ? `${rel}/${name}` : name;
      if (st.isSymbolicLink()) out.push(`${r} -> ${readlinkSync(p)}`);
      else if (st.isDirectory()) {
        out.push(`${r}/ ${st.mtimeMs}`);
        walk(p, r);
      } else out.push(`${r} ${st.size} ${st.mtimeMs}`);
    }
  };
  walk(root, "");
  return out.join("\n");
}

/** Does what systemd does for sitegate.service: ExecStartPre=update check, ExecStart=current entry, Restart=always. */
export class FakeService {
  private child: ChildProcess | null = null;
  private stopping = false;
  readonly log: string[] = [];

  constructor(
    private readonly env: UpdateEnv,
    private readonly args: string[] = ["run"],
    private readonly extraEnv: Record<string, string> = {},
  ) {}

  start(): void {
    this.stopping = false;
    const pre = update(this.env, ["check"]);
    this.log.push(`check: ${pre.status} ${pre.stdout.trim()} ${pre.stderr.trim()}`);
    const child = spawn(process.execPath, [join(this.env.root, "current", "dist", "src", "cli.js"), ...this.args], {
      stdio: ["ignore", "ignore", "pipe"],
      env: { ...process.env, FAKE_DATA_DIR: this.env.dataDir, LOG_LEVEL: "warn", ...this.extraEnv },
    });
    child.stderr!.on("data", (d) => this.log.push(String(d)));
    writeFileSync(join(this.env.dataDir, "service.pid"), String(child.pid));
    this.child = child;
    child.once("exit", (code, sig) => {
      this.log.push(`exit ${code ?? sig}`);
      if (this.child === child) this.child = null;
      if (!this.stopping) setImmediate(() => this.start());
    });
  }

  async stop(): Promise<void> {
    this.stopping = true;
    const c = this.child;
    if (!c) return;
    const gone = new Promise((r) => c.once("exit", r));
    c.kill("SIGKILL");
    await gone;
  }
}

export function serving(env: UpdateEnv): string | null {
  try {
    return readFileSync(join(env.dataDir, "serving"), "utf8");
  } catch {
    return null;
  }
}

export function startsOf(env: UpdateEnv, version: string): number {
  try {
    return readFileSync(join(env.dataDir, "starts.log"), "utf8")
      .split("\n")
      .filter((l) => l === version).length;
  } catch {
    return 0;
  }
}

export function status(env: UpdateEnv): any {
  const r = update(env, ["status", "--json"]);
  if (r.status !== 0) throw new Error(`status: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

/** The header (magic, manifest, signature) and the payload of a bundle file. */
export function splitBundle(file: string): { header: Buffer; payload: Buffer } {
  const b = readFileSync(file);
  let pos = 10;
  pos += 4 + b.readUInt32BE(pos);
  pos += 4 + b.readUInt32BE(pos);
  return { header: b.subarray(0, pos), payload: b.subarray(pos) };
}

/**
 * `good`'s header (signed, with good's payload size and hash) followed by `evil`'s payload,
 * padded to good's payload size with a second gzip member of zeros (gzip allows members in a
 * row; zeros after a tar's end are more end blocks). What an attacker who can write the
 * bundle's folder would put there once the signature was checked.
 */
export function forgedBundle(good: string, evil: string, out: string): string {
  const g = splitBundle(good);
  const e = splitBundle(evil).payload;
  const gap = g.payload.length - e.length;
  if (gap < 64) throw new Error(`the evil payload (${e.length} bytes) must be smaller than the good one (${g.payload.length})`);
  // a stored (level 0) gzip member of n zeros is n + 23 bytes while n < 64 KiB
  let n = gap - 23;
  let pad = gzipSync(Buffer.alloc(n), { level: 0 });
  while (pad.length !== gap) {
    n += gap - pad.length;
    pad = gzipSync(Buffer.alloc(n), { level: 0 });
  }
  writeFileSync(out, Buffer.concat([g.header, e, pad]));
  return out;
}

/** Runs `sitegate update <args>` without blocking this process (for servers that run in it). */
export function updateAsync(
  env: UpdateEnv,
  args: string[],
  extraEnv: Record<string, string> = {},
): Promise<{ code: number | null; out: string }> {
  return new Promise((res) => {
    const c = spawn(process.execPath, [CLI, "update", ...args], { env: updateCliEnv(env, "", extraEnv) });
    let out = "";
    c.stdout.on("data", (d) => (out += d));
    c.stderr.on("data", (d) => (out += d));
    c.once("exit", (code) => res({ code, out }));
  });
}

/** The update state file as apply and check left it (read directly: no CLI process per look). */
export function state(env: UpdateEnv): { pending: any; last: any; highest?: string } {
  try {
    return JSON.parse(readFileSync(join(env.root, "state", "update.json"), "utf8"));
  } catch {
    return { pending: null, last: null };
  }
}

/** The version `current` points at, or null. */
export function currentVersion(env: UpdateEnv): string | null {
  try {
    return readlinkSync(join(env.root, "current")).replace(/^releases\//, "");
  } catch {
    return null;
  }
}

/**
 * Waits until `pred` holds, looking again whenever something changes in the data dir, its
 * update/ folder, the root or its state/ folder (inotify through fs.watch), and once a second
 * in case an event was missed. `pred` must be cheap (file reads, no child processes).
 */
export async function waitFor(env: UpdateEnv, pred: () => boolean, what: string, timeoutMs = 60000): Promise<void> {
  if (pred()) return;
  const dirs = [env.dataDir, join(env.dataDir, "update"), env.root, join(env.root, "state")];
  const watchers = new Map<string, FSWatcher>();
  await new Promise<void>((resolve, reject) => {
    let done = false;
    const finish = (err?: Error) => {
      if (done) return;
      done = true;
      clearInterval(tick);
      clearTimeout(limit);
      for (const w of watchers.values()) w.close();
      if (err) reject(err);
      else resolve();
    };
    const look = () => {
      arm();
      try {
        if (pred()) finish();
      } catch (e) {
        finish(e as Error);
      }
    };
    const arm = () => {
      for (const d of dirs) {
        if (watchers.has(d) || !existsSync(d)) continue;
        try {
          const w = watch(d, look);
          w.on("error", () => {});
          watchers.set(d, w);
        } catch {
          /* gone again: the next look arms it */
        }
      }
    };
    const tick = setInterval(look, 1000);
    const limit = setTimeout(() => finish(new Error(`timed out waiting for ${what}`)), timeoutMs);
    look();
  });
}

// == hand-made payloads: tar entries a normal build never has ==

export interface TarEntry {
  name: string;
  /** "0" file, "5" folder, "1" hard link, "2" symlink, "3" char device, "4" block device, "6" FIFO */
  type: string;
  mode?: number;
  data?: Buffer | string;
  linkname?: string;
}

/** A ustar archive of `entries`, with its two zero end blocks. */
export function tarOf(entries: TarEntry[]): Buffer {
  const blocks: Buffer[] = [];
  for (const e of entries) {
    const data = e.data === undefined ? Buffer.alloc(0) : Buffer.from(e.data);
    const h = Buffer.alloc(512);
    h.write(e.name, 0, 100, "utf8");
    h.write((e.mode ?? (e.type === "5" ? 0o755 : 0o644)).toString(8).padStart(7, "0") + "\0", 100, "latin1");
    h.write("0000000\0", 108, "latin1");
    h.write("0000000\0", 116, "latin1");
    h.write(data.length.toString(8).padStart(11, "0") + "\0", 124, "latin1");
    h.write("00000000000\0", 136, "latin1");
    h.write("        ", 148, "latin1");
    h.write(e.type, 156, "latin1");
    if (e.linkname) h.write(e.linkname, 157, 100, "utf8");
    h.write("ustar\0" + "00", 257, "latin1");
    if (e.type === "3" || e.type === "4") {
      h.write("0000001\0", 329, "latin1");
      h.write("0000003\0", 337, "latin1");
    }
    let sum = 0;
    for (const b of h) sum += b;
    h.write(sum.toString(8).padStart(6, "0") + "\0 ", 148, "latin1");
    blocks.push(h, data, Buffer.alloc((512 - (data.length % 512)) % 512));
  }
  blocks.push(Buffer.alloc(1024));
  return Buffer.concat(blocks);
}

/** The entries of a fake release that starts (package.json and dist/src/cli.js) at `version`. */
export function releaseEntries(version: string): TarEntry[] {
  return [
    { name: "./", type: "5" },
    { name: "./package.json", type: "0", data: JSON.stringify({ name: "sitegate", version, type: "module" }) },
    { name: "./dist/", type: "5" },
    { name: "./dist/src/", type: "5" },
    { name: "./dist/src/cli.js", type: "0", data: `console.log(${JSON.stringify(version)});\n` },
  ];
}

/** A bundle of a hand-made payload, signed with `key`; `manifest` overrides the manifest's fields. */
export function signedBundle(payload: Buffer, version: string, key: KeyObject, out: string, manifest: Partial<Manifest> = {}): string {
  const m = {
    format: 1,
    name: "sitegate",
    version,
    arch: process.arch,
    platform: "linux",
    node_min: "20.0.0",
    created_at: new Date().toISOString(),
    payload_size: payload.length,
    payload_sha256: createHash("sha256").update(payload).digest("hex"),
    unpacked_size: 1 << 20,
    migrations: {},
    ...manifest,
  } as unknown as Manifest;
  writeFileSync(out, Buffer.concat([encodeBundleHeader(m, key), payload]));
  return out;
}

/** A root with fake release 0.1.0 installed (the first install has no gate), in a fresh temp dir. */
export async function withInstalled(fn: (env: UpdateEnv, dir: string) => Promise<void>): Promise<void> {
  await withTmpDir(async (dir) => {
    const env = updateEnv(dir, makeKeys(dir));
    const b = await fakeBundle({ version: "0.1.0", mode: "healthy", key: env.keys.privateKey, out: join(dir, "v010.bundle") });
    const r = update(env, ["apply", b]);
    if (r.status !== 0 || currentVersion(env) !== "0.1.0") throw new Error(`installing 0.1.0: ${r.stdout}${r.stderr}`);
    await fn(env, dir);
  });
}

/**
 * The config `sitegate update apply-request` reads (it decides what a fleet request may ask
 * for): the test gateway's, with the env's data dir, a download folder in `dir`, and the given
 * update block and fleet. Returns the file's path.
 */
export function requestConfig(env: UpdateEnv, dir: string, update: Partial<UpdateConfig>, fleet?: ConfigInput["fleet"]): string {
  const file = join(dir, "config.yaml");
  const input = testConfigInput(env.dataDir, { update: { download_dir: join(dir, "downloads"), ...update }, ...(fleet ? { fleet } : {}) });
  writeFileSync(file, stringify(input));
  return file;
}
