// Over-the-air update tests: fake releases (a tiny entry script that becomes healthy,
// crashes, or hangs), signed bundles of them, the `sitegate update` CLI as a child process,
// and FakeService, which does for a release root what systemd does for the unit: runs
// `sitegate update check` before every start (ExecStartPre) and restarts the entry on exit
// (Restart=always).
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { generateKeyPairSync, randomBytes, type KeyObject } from "node:crypto";
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { packBundle } from "../../src/update/bundle.js";

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
 * runs without ever becoming healthy.
 */
export function stageFakeRelease(dir: string, version: string, mode: FakeMode, padFiles = 0): void {
  mkdirSync(join(dir, "dist", "src"), { recursive: true });
  writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "sitegate", version, type: "module" }));
  writeFileSync(
    join(dir, "dist", "src", "cli.js"),
    `import { appendFileSync, mkdirSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
const VERSION = ${JSON.stringify(version)}, MODE = ${JSON.stringify(mode)};
if (process.argv[2] === "--version") { console.log(VERSION); process.exit(0); }
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
  /** the Node.js the manifest says the release is for (default: this node, no runtime) */
  node?: { version: string; abi: string; runtime: boolean };
}

export async function fakeBundle(o: FakeBundleOptions): Promise<string> {
  const stage = mkdtempSync(join(tmpdir(), "sitegate-fake-"));
  try {
    stageFakeRelease(stage, o.version, o.mode, o.padFiles ?? 0);
    await packBundle({ stageDir: stage, version: o.version, arch: o.arch ?? process.arch, nodeMin: "20.0.0", node: o.node, migrations: o.migrations ?? {}, privateKey: o.key, out: o.out });
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
  return { root: join(dir, "root"), dataDir, keys, restartCmd: `kill -TERM "$(cat '${join(dataDir, "service.pid")}' 2>/dev/null)" 2>/dev/null; true` };
}

/** Runs `sitegate update <args>` against the env's root and data dir. */
export function update(env: UpdateEnv, args: string[], extraEnv: Record<string, string> = {}) {
  return spawnSync(process.execPath, [CLI, "update", ...args], {
    encoding: "utf8",
    env: { ...process.env, SITEGATE_ROOT: env.root, SITEGATE_UPDATE_KEYS: env.keys.trustDir, SITEGATE_DATA_DIR: env.dataDir, SITEGATE_RESTART_CMD: env.restartCmd, ...extraEnv },
  });
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
    return readFileSync(join(env.dataDir, "starts.log"), "utf8").split("\n").filter((l) => l === version).length;
  } catch {
    return 0;
  }
}

export function status(env: UpdateEnv): any {
  const r = update(env, ["status", "--json"]);
  if (r.status !== 0) throw new Error(`status: ${r.stderr}`);
  return JSON.parse(r.stdout);
}
