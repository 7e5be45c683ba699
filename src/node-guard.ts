// Refuses a Node.js other than the one this release was built for, before anything else
// loads: a native addon built for Node 24's ABI crashes a Node 20 process without a word,
// so every entry point imports this module first (ES modules evaluate imports in order).
import { existsSync, readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** The runtime the release is built and tested with: package.json `engines` and the Makefile's NODE_VERSION. */
export const NEEDED_NODE = { major: 24, minor: 21 } as const;

/** Why `version` (as `process.versions.node` gives it) cannot run this release, or undefined when it can. */
export function unsupportedNode(version: string): string | undefined {
  const [major = NaN, minor = NaN] = version.split(".").map(Number);
  if (major === NEEDED_NODE.major && minor >= NEEDED_NODE.minor) return undefined;
  return `needs Node.js ${NEEDED_NODE.major} (>= ${NEEDED_NODE.major}.${NEEDED_NODE.minor}.0), not ${version} (${process.execPath})`;
}

/**
 * The right runtime for the code in `moduleDir` (this module's folder): a release's own
 * (`<release>/node/bin/node`, beside `dist/`), or a checkout's pinned one
 * (`var/runtime/node-v24.x-linux-<arch>/bin/node`, which `make setup-run` fetches, and
 * `bin/sitegate` runs the CLI on). Looked for in the folders above, up to the filesystem root.
 */
export function runtimeHint(moduleDir: string, arch: string = process.arch): string {
  const cpu = arch === "arm64" ? "arm64" : "x64";
  for (let dir = moduleDir; ; dir = dirname(dir)) {
    const release = join(dir, "node", "bin", "node");
    if (existsSync(release) && existsSync(join(dir, "dist"))) return `run it on the release's own runtime, ${release}`;
    const runtimes = join(dir, "var", "runtime");
    if (existsSync(join(dir, "Makefile")) && existsSync(join(dir, "package.json"))) {
      const pinned = existsSync(runtimes)
        ? readdirSync(runtimes).find((n) => n.startsWith(`node-v${NEEDED_NODE.major}.`) && n.endsWith(`-linux-${cpu}`))
        : undefined;
      if (pinned) return `run it on the checkout's runtime, ${join(runtimes, pinned, "bin", "node")} (bin/sitegate runs the CLI on it)`;
      return `run \`make setup-run build\` in ${dir} to fetch the pinned runtime into ${runtimes}, then bin/sitegate`;
    }
    if (dirname(dir) === dir) break;
  }
  return "run it on the release's own runtime, /opt/sitegate/current/node/bin/node (/usr/bin/sitegate and sitegate-sim do)";
}

const refusal = unsupportedNode(process.versions.node);
if (refusal) {
  const name = process.argv[1]?.includes("hw-sim") ? "sitegate-sim" : "sitegate";
  process.stderr.write(`${name}: ${refusal}; ${runtimeHint(dirname(fileURLToPath(import.meta.url)))}\n`);
  process.exit(1);
}
