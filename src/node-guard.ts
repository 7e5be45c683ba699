// Refuses a Node.js other than the one this release was built for, before anything else
// loads: a native addon built for Node 24's ABI crashes a Node 20 process without a word,
// so every entry point imports this module first (ES modules evaluate imports in order).

/** The runtime the release is built and tested with: package.json `engines` and the Makefile's NODE_VERSION. */
export const NEEDED_NODE = { major: 24, minor: 21 } as const;

/** Why `version` (as `process.versions.node` gives it) cannot run this release, or undefined when it can. */
export function unsupportedNode(version: string): string | undefined {
  const [major = NaN, minor = NaN] = version.split(".").map(Number);
  if (major === NEEDED_NODE.major && minor >= NEEDED_NODE.minor) return undefined;
  return `needs Node.js ${NEEDED_NODE.major} (>= ${NEEDED_NODE.major}.${NEEDED_NODE.minor}.0), not ${version} (${process.execPath})`;
}

const refusal = unsupportedNode(process.versions.node);
if (refusal) {
  const name = process.argv[1]?.includes("hw-sim") ? "sitegate-sim" : "sitegate";
  process.stderr.write(`${name}: ${refusal}; run the release's own runtime or \`make run\`\n`);
  process.exit(1);
}
