// The checks apply runs on the private copy before it changes anything; each refuses with
// BundleRefused.
import { lstatSync, mkdirSync, statfsSync, statSync } from "node:fs";
import { BundleRefused, compareVersions, isValidVersion, type Manifest } from "./bundle-format.js";
import type { ReceivedBundle } from "./receive.js";

/** Free space kept on top of a release's unpacked_size. */
const SPACE_HEADROOM = 16 * 1024 * 1024;

/** Makes `dir` if needed and refuses it unless it is a folder of this user that nobody else may write (a copy made there must stay private). */
export function checkPrivateDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const st = lstatSync(dir);
  const me = process.getuid?.() ?? st.uid;
  if (st.isSymbolicLink() || !st.isDirectory() || st.uid !== me || (st.mode & 0o022) !== 0)
    throw new BundleRefused(
      `refused: the download folder ${dir} must be a folder of uid ${me} that group and others cannot write (it is ${st.isSymbolicLink() ? "a link" : `uid ${st.uid}, mode ${(st.mode & 0o7777).toString(8)}`})`,
    );
}

/** The manifest is a sitegate release's, with the size it unpacks to. */
export function checkManifest(m: Manifest): void {
  if (
    m === null ||
    typeof m !== "object" ||
    m.format !== 1 ||
    m.name !== "sitegate" ||
    typeof m.version !== "string" ||
    !isValidVersion(m.version)
  )
    throw new BundleRefused("refused: the manifest is not a sitegate release manifest");
  if (!Number.isSafeInteger(m.unpacked_size) || m.unpacked_size < 0)
    throw new BundleRefused("refused: the manifest has no unpacked_size (a bundle from an older `sitegate update bundle`?)");
}

/** The release is built for this platform, arch and (without its own runtime) this Node.js. */
export function checkRunsHere(m: Manifest): void {
  if (m.arch !== process.arch || (m.platform ?? "linux") !== process.platform) {
    throw new BundleRefused(`refused: the bundle is for ${m.platform}-${m.arch}, this controller is ${process.platform}-${process.arch}`);
  }
  if (!m.runtime && (typeof m.node_min !== "string" || compareVersions(process.versions.node, m.node_min) < 0))
    throw new BundleRefused(`refused: the release needs Node.js >= ${m.node_min}, this controller has ${process.versions.node}`);
  // a release without its own runtime runs on this node: its addons must have been built for this ABI
  if (!m.runtime && m.node_abi !== undefined && m.node_abi !== process.versions.modules) {
    throw new BundleRefused(
      `refused: the bundle's native addons are for Node.js ${m.node_version} (ABI ${m.node_abi}) and it carries no runtime; this controller runs Node.js ${process.versions.node} (ABI ${process.versions.modules})`,
    );
  }
}

/** The payload hashed while the private copy was written is the one the signed manifest names. */
export function checkPayload(b: ReceivedBundle): void {
  if (b.manifest.payload_size !== b.payloadSize || b.payloadSha256 !== b.manifest.payload_sha256) {
    throw new BundleRefused("refused: the payload does not match the sha256 in its manifest (damaged or tampered)");
  }
}

/**
 * Refuses the current release again, and one older than the floor (the highest of the current
 * release and any release switched in here) unless downgrades are allowed. Returns the floor.
 */
export function checkVersionFloor(
  version: string,
  cur: string | null,
  highest: string | undefined,
  allowDowngrade: boolean,
): string | null {
  const floor =
    [highest, cur]
      .filter((v): v is string => typeof v === "string" && isValidVersion(v))
      .sort(compareVersions)
      .pop() ?? null;
  if (cur !== null && compareVersions(version, cur) === 0) throw new BundleRefused(`refused: ${version} is already the current release`);
  if (floor !== null && compareVersions(version, floor) < 0 && !allowDowngrade) {
    const what = floor === cur ? `the current release ${cur}` : `${floor}, the highest release installed here`;
    throw new BundleRefused(`refused: ${version} is older than ${what} (--allow-downgrade installs it)`);
  }
  return floor;
}

/**
 * Room for what the update writes: the release under `root`, and the database backup
 * (`backup`: its folder and the most it can take) before a migrating release, each with the
 * headroom. Two on one file system need their sum there.
 */
export function checkFreeSpace(root: string, unpackedSize: number, backup?: { dir: string; bytes: number }): void {
  const needs = new Map<number, { path: string; bytes: number; what: string[] }>();
  const add = (path: string, bytes: number, what: string) => {
    const dev = statSync(path).dev;
    const n = needs.get(dev) ?? { path, bytes: 0, what: [] };
    n.bytes += bytes;
    n.what.push(what);
    needs.set(dev, n);
  };
  add(root, unpackedSize, `the release unpacks to ${mib(unpackedSize)}`);
  if (backup && backup.bytes > 0)
    add(backup.dir, backup.bytes, `the database backup before its migrations takes up to ${mib(backup.bytes)}`);
  for (const n of needs.values()) {
    const free = freeBytes(n.path);
    if (free < n.bytes + SPACE_HEADROOM)
      throw new BundleRefused(
        `refused: ${n.what.join(" and ")} and needs ${mib(SPACE_HEADROOM)} to spare; ${n.path} has ${mib(free)} free`,
      );
  }
}

function freeBytes(path: string): number {
  const s = statfsSync(path);
  return s.bavail * s.bsize;
}

function mib(n: number): string {
  return `${(n / 1048576).toFixed(1)} MiB`;
}
