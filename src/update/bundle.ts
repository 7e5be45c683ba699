// Builds a release bundle: the built code (dist/src), the production node_modules for one
// architecture, a manifest, all signed with ed25519. Runs on the build machine (`make bundle`).
// node_modules are copied from an existing install (the production closure from
// package-lock.json), never downloaded: for another architecture pass --node-modules with
// an install made on (or for) that architecture; native modules are checked by their ELF header.
import { spawnSync } from "node:child_process";
import {
  chmodSync,
  closeSync,
  cpSync,
  existsSync,
  fsyncSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join, relative, sep } from "node:path";
import type { KeyObject } from "node:crypto";
import { encodeBundleHeader, sha256OfRange, type Manifest } from "./bundle-format.js";
import { fsyncPath } from "./fsx.js";
import { unpackedSize } from "./untar.js";
import { SitegateError } from "../errors.js";

/** ELF e_machine of each Node.js architecture a controller may have. */
const ELF_MACHINE: Record<string, number> = { x64: 62, arm64: 183, arm: 40, ia32: 3 };

export interface StageOptions {
  /** the project: package.json, package-lock.json, dist/src */
  projectDir: string;
  stageDir: string;
  arch: string;
  version: string;
  /** where the production packages are copied from (default projectDir/node_modules) */
  nodeModulesDir?: string;
  /** an unpacked node-linux-<arch> package (bin/node, include/node) the release carries as node/ */
  runtimeDir?: string;
}

/** The Node.js a release runs on: the carried runtime's, or (no runtime) the building node's. */
export interface NodeTarget {
  version: string;
  abi: string;
  runtime: boolean;
}

/** Lays out a release directory: dist/src, package.json (with `version`), README, systemd/, node_modules, node/. */
export function stageRelease(o: StageOptions): NodeTarget {
  const dist = join(o.projectDir, "dist", "src");
  if (!existsSync(join(dist, "cli.js"))) throw new SitegateError("UPDATE_FAILED", `${dist}/cli.js is missing; build first (tsc)`);
  mkdirSync(join(o.stageDir, "dist"), { recursive: true });
  cpSync(dist, join(o.stageDir, "dist", "src"), { recursive: true });
  // data files the code reads from the source tree (every non-TypeScript file under src/: the built-in profiles)
  cpSync(join(o.projectDir, "src"), join(o.stageDir, "src"), { recursive: true, filter: (p) => !p.endsWith(".ts") });
  const pkg = JSON.parse(readFileSync(join(o.projectDir, "package.json"), "utf8")) as Record<string, unknown>;
  pkg.version = o.version;
  delete pkg.devDependencies;
  delete pkg.scripts;
  delete pkg.workspaces;
  pkg.bin = { sitegate: "dist/src/cli.js" };
  writeFileSync(join(o.stageDir, "package.json"), JSON.stringify(pkg, null, 2) + "\n");
  // the units, but the simulator's (it ships in its own package)
  for (const f of ["README.md", "systemd"]) {
    if (existsSync(join(o.projectDir, f)))
      cpSync(join(o.projectDir, f), join(o.stageDir, f), { recursive: true, filter: (p) => !basename(p).startsWith("sitegate-sim.") });
  }
  copyProductionModules(o.projectDir, o.nodeModulesDir ?? join(o.projectDir, "node_modules"), join(o.stageDir, "node_modules"), o.arch);
  // the bench simulator is its own package (sitegate-sim, packaging/build-sim-deb.sh), never in a release
  if (!o.runtimeDir) return { version: process.versions.node, abi: process.versions.modules, runtime: false };
  return stageRuntime(o.runtimeDir, join(o.stageDir, "node"), o.arch);
}

/** Copies a node-linux-<arch> package's binary and licence into the release, after checking its CPU. */
function stageRuntime(from: string, to: string, arch: string): NodeTarget {
  const bin = join(from, "bin", "node");
  if (!existsSync(bin)) throw new SitegateError("UPDATE_FAILED", `${from} is not a Node.js runtime (no bin/node)`);
  const machine = elfMachine(bin);
  if (machine !== ELF_MACHINE[arch])
    throw new SitegateError("UPDATE_FAILED", `${bin} is not a Linux ${arch} executable (ELF machine ${machine})`);
  const header = join(from, "include", "node", "node_version.h");
  const h = existsSync(header) ? readFileSync(header, "utf8") : "";
  const v = (name: string) => new RegExp(`#define ${name} (\\d+)`).exec(h)?.[1];
  const abi = v("NODE_MODULE_VERSION");
  const version = [v("NODE_MAJOR_VERSION"), v("NODE_MINOR_VERSION"), v("NODE_PATCH_VERSION")];
  if (!abi || version.some((x) => x === undefined))
    throw new SitegateError("UPDATE_FAILED", `${header}: no NODE_MODULE_VERSION / NODE_*_VERSION (not a Node.js runtime package?)`);
  mkdirSync(join(to, "bin"), { recursive: true });
  cpSync(bin, join(to, "bin", "node"));
  chmodSync(join(to, "bin", "node"), 0o755);
  if (existsSync(join(from, "LICENSE"))) cpSync(join(from, "LICENSE"), join(to, "LICENSE"));
  return { version: version.join("."), abi, runtime: true };
}

/** The e_machine of an ELF file, or -1 when it is not one. */
function elfMachine(file: string): number {
  const fd = openSync(file, "r");
  try {
    const h = Buffer.alloc(20);
    if (readSync(fd, h, 0, 20, 0) < 20 || h.readUInt32BE(0) !== 0x7f454c46) return -1;
    return h.readUInt16LE(18);
  } finally {
    closeSync(fd);
  }
}

/** `prebuilds/<entry>` names a platform and arch list (`linux-arm64`, `linux-x64+arm64`, `linux-arm64.node`); true when it is exactly linux + `arch`. */
export function prebuildMatches(entry: string, arch: string): boolean {
  const name = entry.replace(/\.node$/, "");
  const dash = name.indexOf("-");
  if (dash < 0) return false;
  return (
    name.slice(0, dash) === "linux" &&
    name
      .slice(dash + 1)
      .split("+")
      .includes(arch)
  );
}

function copyProductionModules(projectDir: string, from: string, to: string, arch: string): void {
  const lock = JSON.parse(readFileSync(join(projectDir, "package-lock.json"), "utf8")) as {
    packages: Record<string, { dev?: boolean; devOptional?: boolean; link?: boolean }>;
  };
  for (const [path, info] of Object.entries(lock.packages)) {
    // a link is a workspace package of this repository (hw-sim: sitegate-sim), not a dependency
    if (!path.startsWith("node_modules/") || info.dev || info.devOptional || info.link) continue;
    const src = join(from, path.slice("node_modules/".length));
    if (!existsSync(src)) continue; // an optional dependency not installed on this platform
    const dst = join(to, path.slice("node_modules/".length));
    const native = existsSync(join(src, "binding.gyp"));
    cpSync(src, dst, {
      recursive: true,
      dereference: true,
      filter: (p) => keep(relative(src, p), native, arch),
    });
    // a package that builds an addon and has none for this arch would crash-loop on the controller
    if (native && !hasAddon(dst)) {
      throw new SitegateError(
        "UPDATE_FAILED",
        `${path.slice("node_modules/".length)} has a binding.gyp but no addon for linux-${arch} (neither build/Release/*.node nor prebuilds/linux-${arch}); build it for ${arch} (make bundle BUNDLE_ARCH=${arch}) or pass --node-modules DIR`,
      );
    }
  }
  checkNativeModules(to, arch);
}

/** What a package keeps: not its nested node_modules (own lock entries), no build leftovers, only this arch's prebuilds. */
function keep(rel: string, native: boolean, arch: string): boolean {
  if (rel === "") return true;
  const parts = rel.split(sep);
  if (parts[0] === "node_modules") return false;
  if (parts.some((p) => p === ".github" || p === "test" || p === "tests")) return false;
  // types, source maps and docs are not run (about a third of the tree)
  if (/\.(d\.[mc]?ts|[mc]?ts|map|md|markdown)$/i.test(parts.at(-1) ?? "")) return false;
  const pb = parts.indexOf("prebuilds");
  const prebuild = pb >= 0 ? parts[pb + 1] : undefined;
  if (prebuild !== undefined && !prebuildMatches(prebuild, arch)) return false;
  if (native) {
    if (parts[0] === "src" || parts[0] === "deps") return false;
    if (parts[0] === "build") {
      // keep build/ and build/Release/, and only the addon itself inside
      if (parts.length === 1) return true;
      if (parts[1] !== "Release") return false;
      if (parts.length === 2) return true;
      const addon = parts[2] ?? "";
      return parts.length === 3 && addon.endsWith(".node") && !addon.includes("test");
    }
  }
  return true;
}

function hasAddon(dir: string): boolean {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    if (e.isDirectory() && hasAddon(join(dir, e.name))) return true;
    if (e.isFile() && e.name.endsWith(".node")) return true;
  }
  return false;
}

/** Refuses a bundle whose native addons were built for another CPU. */
function checkNativeModules(dir: string, arch: string): void {
  const want = ELF_MACHINE[arch];
  if (want === undefined)
    throw new SitegateError("UPDATE_FAILED", `unknown architecture ${arch} (one of ${Object.keys(ELF_MACHINE).join(", ")})`);
  const walk = (d: string): void => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.isFile() && e.name.endsWith(".node")) {
        if (elfMachine(p) !== want) {
          throw new SitegateError(
            "UPDATE_FAILED",
            `${relative(dir, p)} is not a Linux ${arch} addon; install node_modules for ${arch} and pass --node-modules DIR`,
          );
        }
      }
    }
  };
  walk(dir);
}

export interface PackOptions {
  stageDir: string;
  version: string;
  arch: string;
  nodeMin: string;
  /** what stageRelease returned (default: the building node, no runtime) */
  node?: NodeTarget;
  migrations: Record<string, number>;
  privateKey: KeyObject;
  out: string;
}

/** Packs a staged release into a signed bundle file (temp name, fsync, rename). */
export async function packBundle(o: PackOptions): Promise<{ file: string; manifest: Manifest; size: number }> {
  const work = mkdtempSync(join(tmpdir(), "sitegate-bundle-"));
  try {
    const payload = join(work, "payload.tar.gz");
    chmodSync(o.stageDir, 0o755);
    const tar = spawnSync("tar", ["-C", o.stageDir, "--sort=name", "--owner=0", "--group=0", "--numeric-owner", "-czf", payload, "."], {
      encoding: "utf8",
    });
    if (tar.status !== 0) throw new SitegateError("UPDATE_FAILED", `tar failed: ${tar.stderr.trim()}`);
    const payloadSize = statSync(payload).size;
    const manifest: Manifest = {
      format: 1,
      name: "sitegate",
      version: o.version,
      arch: o.arch,
      platform: "linux",
      node_min: o.nodeMin,
      node_version: o.node?.version ?? process.versions.node,
      node_abi: o.node?.abi ?? process.versions.modules,
      runtime: o.node?.runtime ?? false,
      created_at: new Date().toISOString(),
      payload_size: payloadSize,
      payload_sha256: await sha256OfRange(payload, 0, payloadSize),
      unpacked_size: treeSize(o.stageDir),
      migrations: o.migrations,
    };
    const header = encodeBundleHeader(manifest, o.privateKey);
    mkdirSync(dirname(o.out), { recursive: true });
    const tmp = join(dirname(o.out), `.${basename(o.out)}.tmp`);
    const fd = openSync(tmp, "w", 0o644);
    try {
      writeSync(fd, header);
      const src = openSync(payload, "r");
      const buf = Buffer.alloc(1 << 20);
      for (;;) {
        const n = readSync(src, buf, 0, buf.length, null);
        if (n === 0) break;
        writeSync(fd, buf, 0, n);
      }
      closeSync(src);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, o.out);
    fsyncPath(dirname(o.out));
    return { file: o.out, manifest, size: header.length + payloadSize };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/** What the staged tree unpacks to, as the unpack counts it (file bytes plus a cost per entry). */
function treeSize(root: string): number {
  let bytes = 0;
  let entries = 1; // the top folder itself
  const walk = (d: string): void => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      entries++;
      if (e.isDirectory()) walk(p);
      else bytes += statSync(p).size;
    }
  };
  walk(root);
  return unpackedSize(bytes, entries);
}

/** "20" or ">=20.3" from package.json engines to "20.0.0" / "20.3.0". */
export function nodeMinFromEngines(range: string | undefined): string {
  const m = /(\d+)(?:\.(\d+))?(?:\.(\d+))?/.exec(range ?? "");
  return m ? `${m[1]}.${m[2] ?? 0}.${m[3] ?? 0}` : "20.0.0";
}
