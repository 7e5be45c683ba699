// Installs, gates and rolls back releases under <root> (default /opt/sitegate):
//   <root>/releases/<version>/   complete releases (unpacked under .tmp-*, fsynced, renamed)
//   <root>/current  -> releases/<version>   what systemd runs (switched by symlink + rename)
//   <root>/previous -> releases/<version>   the last release known to start; its code runs
//                                           `update check` before every start (ExecStartPre)
//   <root>/state/update.json                the pending release and the last outcome
// A pending release must write its health marker (<data_dir>/update/healthy-<version>)
// within the deadline and within max_starts starts; otherwise the next `update check`
// switches `current` back, restores the database backup that apply took (when the new
// release brings migrations), and the previous release runs again.
import { spawnSync } from "node:child_process";
import {
  chmodSync,
  createReadStream,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  statfsSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { pipeline } from "node:stream/promises";
import { createGunzip } from "node:zlib";
import { basename, join } from "node:path";
import { randomBytes } from "node:crypto";
import {
  BundleRefused,
  checkSignature,
  compareVersions,
  isValidVersion,
  loadTrustedKeys,
  sha256OfRange,
  type Manifest,
} from "./bundle-format.js";
import { checkDataDir, prepareDataDir, restoreDataDir } from "./data-dir.js";
import { exists, fsyncPath, fsyncTree, readLinkOrNull, removeTree, symlinkAtomic, writeFileAtomic } from "./fsx.js";
import { hasHealthMarker } from "./health-marker.js";
import { DEFAULT_MAX_BUNDLE_BYTES, Incoming, receiveFile, receiveUrl, removeStaleIncoming, type ReceivedBundle } from "./receive.js";
import { SafeUntar } from "./untar.js";
import { testHook } from "../util/test-hooks.js";
import { SitegateError } from "../errors.js";

export const DEFAULT_ROOT = "/opt/sitegate";
export const DEFAULT_KEYS_DIR = "/etc/sitegate/update-keys";
export const DEFAULT_RESTART_CMD = "systemctl reset-failed sitegate.service 2>/dev/null; systemctl restart sitegate.service";
export { DB_FILE } from "../storage/files.js";
export { DEFAULT_MAX_BUNDLE_BYTES } from "./receive.js";
/** Free space kept on top of a release's unpacked_size. */
const SPACE_HEADROOM = 16 * 1024 * 1024;

export interface Pending {
  version: string;
  previous: string;
  data_dir: string;
  applied_at: string;
  deadline_at: string;
  /** each start of the pending release must bring the marker within this many seconds */
  health_timeout_s: number;
  starts: number;
  max_starts: number;
  /** installing: apply has not switched yet; gating: waiting for the marker; rollback: the next check switches back */
  phase: "installing" | "gating" | "rollback";
  /** the apply process (pid and kernel boot id) while installing */
  installer?: { pid: number; boot_id: string };
  reason?: string;
  /** VACUUM INTO copy taken by apply when the new release brings migrations */
  backup: string | null;
}

export interface Outcome {
  version: string;
  previous: string;
  result: "healthy" | "rolled back" | "abandoned" | "refused";
  reason?: string;
  at: string;
  data_dir: string;
  backup: string | null;
}

export interface UpdateState {
  pending: Pending | null;
  last: Outcome | null;
  /** the highest release ever switched in here: the floor for apply without --allow-downgrade */
  highest?: string;
}

export interface Layout {
  root: string;
  releases: string;
  current: string;
  previous: string;
  stateFile: string;
}

export function layout(root: string): Layout {
  return {
    root,
    releases: join(root, "releases"),
    current: join(root, "current"),
    previous: join(root, "previous"),
    stateFile: join(root, "state", "update.json"),
  };
}

export function readState(l: Layout): UpdateState {
  try {
    return JSON.parse(readFileSync(l.stateFile, "utf8")) as UpdateState;
  } catch {
    return { pending: null, last: null };
  }
}

function writeState(l: Layout, s: UpdateState): void {
  const dir = join(l.root, "state");
  mkdirSync(dir, { recursive: true });
  chmodSync(dir, 0o755); // the daemon reads the last outcome for the fleet's status topic
  writeFileAtomic(l.stateFile, JSON.stringify(s, null, 2) + "\n", 0o644);
}

/** The version a release symlink points at, or null. */
export function linkedVersion(link: string): string | null {
  const t = readLinkOrNull(link);
  return t === null ? null : basename(t);
}

type Say = (line: string) => void;

export interface ServiceControl {
  /** shell command that restarts the service; "" skips it */
  restartCmd: string;
}

function restart(ctl: ServiceControl, say: Say): void {
  if (ctl.restartCmd.trim() === "") {
    say("restart skipped (no restart command)");
    return;
  }
  const r = spawnSync("/bin/sh", ["-c", ctl.restartCmd], { stdio: "inherit" });
  if (r.status !== 0) throw new SitegateError("UPDATE_FAILED", `restart command failed (exit ${r.status}): ${ctl.restartCmd}`);
}

// == apply ==

export interface ApplyOptions extends ServiceControl {
  root: string;
  keysDir: string;
  dataDir: string;
  allowDowngrade: boolean;
  healthTimeoutS: number;
  maxStarts: number;
  /** the largest bundle (file or download) taken in */
  maxBytes?: number;
  /** a fleet request's pins: the bundle file's sha256, the version it must carry, and its size when announced */
  expect?: { sha256: string; version: string; size?: number };
  /** a fleet request: the URLs it may download from (update.allowed_urls) */
  allowedUrls?: readonly string[];
  /** where the private copy is made (default: the root); a folder only this user may write */
  downloadDir?: string;
  say: Say;
}

/**
 * Takes the bundle into a private copy, verifies that copy (signature, manifest, arch, Node.js,
 * payload hash, version floor, data dir, free space) and installs from it. Throws BundleRefused
 * before changing anything; a failure after that removes what it unpacked.
 */
export async function applyBundle(source: string, o: ApplyOptions): Promise<{ version: string; previous: string | null }> {
  const l = layout(o.root);
  const url = /^[a-z][a-z0-9+.-]*:\/\//i.test(source);
  if (url && !/^https:\/\//i.test(source)) throw new BundleRefused(`refused: only https:// URLs are fetched (${source})`);
  const maxBytes = Math.min(o.maxBytes ?? DEFAULT_MAX_BUNDLE_BYTES, o.expect?.size ?? Infinity);
  const into = o.downloadDir ?? l.root;
  if (o.downloadDir) checkPrivateDir(o.downloadDir);
  removeStaleIncoming(into, alive);
  const incoming = new Incoming(into, source, maxBytes);
  try {
    if (url) await receiveUrl(source, incoming, { maxBytes, allowed: o.allowedUrls, size: o.expect?.size });
    else receiveFile(source, incoming);
    const b = incoming.finish();
    if (o.expect) {
      const sha = await sha256OfRange(b.file, 0, statSync(b.file).size);
      if (sha !== o.expect.sha256)
        throw new BundleRefused(`refused: the bundle's sha256 is ${sha}, the request asked for ${o.expect.sha256}`);
      if (b.manifest?.version !== o.expect.version)
        throw new BundleRefused(`refused: the bundle is release ${String(b.manifest?.version)}, the request asked for ${o.expect.version}`);
    }
    return await install(b, l, o);
  } finally {
    incoming.discard();
  }
}

/** Makes `dir` if needed and refuses it unless it is a folder of this user that nobody else may write (a copy made there must stay private). */
function checkPrivateDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const st = lstatSync(dir);
  const me = process.getuid?.() ?? st.uid;
  if (st.isSymbolicLink() || !st.isDirectory() || st.uid !== me || (st.mode & 0o022) !== 0)
    throw new BundleRefused(
      `refused: the download folder ${dir} must be a folder of uid ${me} that group and others cannot write (it is ${st.isSymbolicLink() ? "a link" : `uid ${st.uid}, mode ${(st.mode & 0o7777).toString(8)}`})`,
    );
}

/** Verifies the private copy, unpacks it into releases/ and switches `current` to it; the steps run in this order. */
async function install(b: ReceivedBundle, l: Layout, o: ApplyOptions): Promise<{ version: string; previous: string | null }> {
  const m = b.manifest;
  const signer = checkSignature(b, loadTrustedKeys(o.keysDir));
  checkManifest(m);
  checkRunsHere(m);
  checkPayload(b);
  checkDataDir(o.dataDir);
  const st = await stateWithNoUpdatePending(l, o);
  const cur = linkedVersion(l.current);
  const floor = checkVersionFloor(m.version, cur, st.highest, o.allowDowngrade);
  checkFreeSpace(l.root, m.unpacked_size);
  o.say(`bundle ${m.version} (${m.arch}) signed by ${signer}, payload ${m.payload_sha256.slice(0, 12)}… ok`);
  await testHook("verified");

  // Nothing has changed so far. From here on every step leaves `current` at a complete release.
  const staged = await stageRelease(b, l);
  const dest = placeRelease(l, m.version, staged);
  await testHook("unpacked");

  // Taken here, not at the first start: a large database on an SD card can take longer
  // than systemd grants a start. Rows written by the old release from now until the
  // restart are not in it.
  const backup = prepareDataDir(o.dataDir, { version: m.version, migrations: cur === null ? null : (m.migrations ?? {}) });
  if (backup) o.say(`database backed up to ${backup} (release ${m.version} brings new migrations)`);
  const target = `releases/${m.version}`;
  const highest = floor !== null && compareVersions(floor, m.version) > 0 ? floor : m.version;
  if (cur === null) {
    // first install: nothing to fall back to, so no gate
    symlinkAtomic(target, l.previous);
    symlinkAtomic(target, l.current);
    writeState(l, { pending: null, last: st.last, highest });
  } else {
    await switchGated(l, st, { version: m.version, previous: cur, backup, highest }, o);
  }
  // the release before `previous` is no longer a rollback target: its space goes back now
  pruneReleases(l);
  o.say(`installed ${dest}; current -> ${target}`);
  await testHook("switched");
  restart(o, o.say);
  return { version: m.version, previous: cur };
}

/** The manifest is a sitegate release's, with the size it unpacks to. */
function checkManifest(m: Manifest): void {
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
function checkRunsHere(m: Manifest): void {
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
function checkPayload(b: ReceivedBundle): void {
  if (b.manifest.payload_size !== b.payloadSize || b.payloadSha256 !== b.manifest.payload_sha256) {
    throw new BundleRefused("refused: the payload does not match the sha256 in its manifest (damaged or tampered)");
  }
}

/** The update state, refused while another update is installing, gating or rolling back. */
async function stateWithNoUpdatePending(l: Layout, o: ApplyOptions): Promise<UpdateState> {
  let st = readState(l);
  if (st.pending?.phase === "installing") {
    // an apply that died before its switch leaves this; the check drops it (or keeps waiting while that apply runs)
    await checkUpdate({ root: o.root, timer: true, restartCmd: "", say: o.say });
    st = readState(l);
  }
  if (st.pending) {
    const what = { installing: "being installed by another apply", gating: "waiting for its health check", rollback: "being rolled back" }[
      st.pending.phase
    ];
    throw new BundleRefused(`refused: the update to ${st.pending.version} is still ${what}; see \`sitegate update status\``);
  }
  return st;
}

/**
 * Refuses the current release again, and one older than the floor (the highest of the current
 * release and any release switched in here) unless downgrades are allowed. Returns the floor.
 */
function checkVersionFloor(version: string, cur: string | null, highest: string | undefined, allowDowngrade: boolean): string | null {
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

function checkFreeSpace(root: string, unpackedSize: number): void {
  const free = freeBytes(root);
  if (free < unpackedSize + SPACE_HEADROOM) {
    throw new BundleRefused(
      `refused: the release unpacks to ${mib(unpackedSize)} and needs ${mib(SPACE_HEADROOM)} to spare; ${root} has ${mib(free)} free`,
    );
  }
}

/** Unpacks the private copy into a fresh .tmp-* directory under releases/ and checks it is the release; returns that directory. */
async function stageRelease(b: ReceivedBundle, l: Layout): Promise<string> {
  // The daemon's user runs the release, so its folders must be readable whatever umask the
  // installer runs under (the root units have 0077); the modes come from the signed payload.
  const umask = process.umask(0o022);
  try {
    return await stageReleaseFiles(b, l);
  } finally {
    process.umask(umask);
  }
}

async function stageReleaseFiles(b: ReceivedBundle, l: Layout): Promise<string> {
  const m = b.manifest;
  mkdirSync(l.releases, { recursive: true });
  pruneReleases(l);
  const tmp = join(l.releases, `.tmp-${m.version}-${randomBytes(4).toString("hex")}`);
  mkdirSync(tmp, { mode: 0o700 });
  try {
    await unpack(b.file, b.payloadOffset, b.payloadSize, tmp, m.unpacked_size);
    const pkg = JSON.parse(readFileSync(join(tmp, "package.json"), "utf8")) as { version?: string };
    if (
      pkg.version !== m.version ||
      !existsSync(join(tmp, "dist", "src", "cli.js")) ||
      (m.runtime === true && !existsSync(join(tmp, "node", "bin", "node")))
    ) {
      throw new BundleRefused(`refused: the payload is not release ${m.version} (package.json says ${pkg.version})`);
    }
    writeFileSync(join(tmp, "manifest.json"), JSON.stringify(m, null, 2) + "\n", { mode: 0o644 });
    chmodSync(tmp, 0o755); // the daemon's user reads the code; only root writes it
    fsyncTree(tmp);
  } catch (e) {
    removeTree(tmp);
    throw e;
  }
  return tmp;
}

/** Renames the staged release to releases/<version>, replacing one of that version; returns its path. */
function placeRelease(l: Layout, version: string, tmp: string): string {
  const dest = join(l.releases, version);
  if (exists(dest)) {
    // a release of this version left from before (e.g. rolled back): replace it whole
    const aside = join(l.releases, `.tmp-old-${version}-${randomBytes(4).toString("hex")}`);
    renameSync(dest, aside);
    removeTree(aside);
  }
  renameSync(tmp, dest);
  fsyncPath(l.releases);
  return dest;
}

/** Records the pending release, then switches `previous` and `current`; the next starts must prove it healthy. */
async function switchGated(
  l: Layout,
  st: UpdateState,
  r: { version: string; previous: string; backup: string | null; highest: string },
  o: ApplyOptions,
): Promise<void> {
  const now = Date.now();
  const pending: Pending = {
    version: r.version,
    previous: r.previous,
    data_dir: o.dataDir,
    applied_at: new Date(now).toISOString(),
    deadline_at: new Date(now + o.healthTimeoutS * 1000).toISOString(),
    health_timeout_s: o.healthTimeoutS,
    starts: 0,
    max_starts: o.maxStarts,
    phase: "installing",
    installer: { pid: process.pid, boot_id: bootId() },
    backup: r.backup,
  };
  // "installing" until the switch: a check that runs meanwhile leaves it alone, and one
  // after a power cut here (current still the old release) drops it
  writeState(l, { pending, last: st.last, highest: st.highest });
  await testHook("pending");
  symlinkAtomic(`releases/${r.previous}`, l.previous);
  symlinkAtomic(`releases/${r.version}`, l.current);
  pending.phase = "gating";
  delete pending.installer;
  writeState(l, { pending, last: st.last, highest: r.highest });
}

function freeBytes(path: string): number {
  const s = statfsSync(path);
  return s.bavail * s.bsize;
}

function mib(n: number): string {
  return `${(n / 1048576).toFixed(1)} MiB`;
}

/** Streams the payload of the private copy through gunzip into the safe tar reader, in `dir`. */
async function unpack(file: string, offset: number, size: number, dir: string, limit: number): Promise<void> {
  const untar = new SafeUntar(dir, limit);
  let sent = 0;
  try {
    await pipeline(
      createReadStream(file, { start: offset, end: offset + size - 1, highWaterMark: 64 * 1024 }),
      async function* (src: AsyncIterable<Buffer>) {
        for await (const chunk of src) {
          sent += chunk.length;
          yield chunk;
          if (sent >= size / 2 && sent - chunk.length < size / 2) await testHook("unpack", () => readdirSync(dir).length > 0);
        }
      },
      createGunzip(),
      async function (src: AsyncIterable<Buffer>) {
        for await (const chunk of src) untar.push(chunk);
      },
    );
    untar.finish();
  } catch (e) {
    untar.abort();
    if (e instanceof BundleRefused) throw e;
    throw new BundleRefused(`refused: the payload cannot be unpacked: ${(e as Error).message}`);
  }
}

/** Removes unfinished unpacks and every release but `current` and `previous`. */
function pruneReleases(l: Layout): void {
  const keep = new Set([linkedVersion(l.current), linkedVersion(l.previous)]);
  for (const name of readdirSync(l.releases)) {
    if (name.startsWith(".tmp-") || (!name.startsWith(".") && !keep.has(name))) removeTree(join(l.releases, name));
  }
}

// == check (before every start, and from a timer) ==

export interface CheckOptions extends ServiceControl {
  root: string;
  /** timer mode: never touches files of a running service; restarts it when the gate failed */
  timer: boolean;
  now?: number;
  say: Say;
}

export type CheckResult = "idle" | "abandoned" | "healthy" | "gating" | "rollback requested" | "rolled back";

export async function checkUpdate(o: CheckOptions): Promise<CheckResult> {
  const l = layout(o.root);
  const st = readState(l);
  const p = st.pending;
  if (!p) return "idle";
  const now = o.now ?? Date.now();
  const cur = linkedVersion(l.current);
  if (p.phase === "installing") {
    if (cur === p.version) p.phase = "gating"; // apply died right after its switch
    else if (p.installer && p.installer.boot_id === bootId() && alive(p.installer.pid)) return "gating";
  }
  if (p.phase === "installing" || (p.phase === "gating" && cur !== p.version)) {
    // the switch never happened (power cut during apply) or someone switched by hand
    writeState(l, { ...st, pending: null, last: outcome(p, "abandoned", `current is ${cur}, not ${p.version}`, now) });
    o.say(`update to ${p.version} abandoned: current is ${cur}`);
    return "abandoned";
  }
  if (p.phase === "gating" && hasHealthMarker(p.data_dir, p.version)) {
    writeState(l, { ...st, pending: null, last: outcome(p, "healthy", undefined, now) });
    o.say(`release ${p.version} is healthy; kept`);
    return "healthy";
  }
  if (p.phase === "gating") {
    if (now > Date.parse(p.deadline_at)) {
      p.phase = "rollback";
      p.reason = `not healthy by ${p.deadline_at}`;
    } else if (!o.timer && p.starts >= p.max_starts) {
      p.phase = "rollback";
      p.reason = `started ${p.starts} times without becoming healthy`;
    }
    if (p.phase === "rollback") writeState(l, st);
  }
  if (o.timer) {
    if (p.phase !== "rollback") return "gating";
    o.say(`release ${p.version}: ${p.reason}; restarting to roll back to ${p.previous}`);
    restart(o, o.say);
    return "rollback requested";
  }
  if (p.phase === "rollback") {
    await rollbackNow(l, st, now, o.say);
    return "rolled back";
  }
  p.starts++;
  // the window is per start: a reboot or a long outage in between does not eat it
  p.deadline_at = new Date(now + (p.health_timeout_s ?? 300) * 1000).toISOString();
  writeState(l, st);
  o.say(`release ${p.version}: start ${p.starts} of ${p.max_starts}, healthy by ${p.deadline_at} or rolled back`);
  return "gating";
}

function bootId(): string {
  try {
    return readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim();
  } catch {
    return "";
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Records a fleet request that was refused as the last outcome (a pending update is left alone). */
export function recordRefused(root: string, version: string, reason: string, dataDir: string, now = Date.now()): void {
  const l = layout(root);
  const st = readState(l);
  const cur = linkedVersion(l.current) ?? "";
  writeState(l, {
    ...st,
    last: { version, previous: cur, result: "refused", reason, at: new Date(now).toISOString(), data_dir: dataDir, backup: null },
  });
}

function outcome(p: Pending, result: Outcome["result"], reason: string | undefined, now: number): Outcome {
  return {
    version: p.version,
    previous: p.previous,
    result,
    reason,
    at: new Date(now).toISOString(),
    data_dir: p.data_dir,
    backup: p.backup,
  };
}

/** Switches back and restores the database. Idempotent: a power cut half-way is finished by the next check. */
async function rollbackNow(l: Layout, st: UpdateState, now: number, say: Say): Promise<void> {
  const p = st.pending!;
  if (!exists(join(l.releases, p.previous, "dist", "src", "cli.js"))) {
    writeState(l, { ...st, pending: null, last: outcome(p, "abandoned", `cannot roll back: release ${p.previous} is gone`, now) });
    say(`cannot roll back ${p.version}: release ${p.previous} is gone`);
    return;
  }
  symlinkAtomic(`releases/${p.previous}`, l.current);
  symlinkAtomic(`releases/${p.previous}`, l.previous);
  if (p.data_dir) {
    // a data dir the daemon has turned into links is left alone: the code still rolls back
    try {
      if (restoreDataDir(p.data_dir, p.backup, p.version)) say(`database restored from ${p.backup}`);
    } catch (e) {
      say(`database not restored: ${(e as Error).message}`);
    }
  }
  writeState(l, { ...st, pending: null, last: { ...outcome(p, "rolled back", p.reason, now), backup: null } });
  say(`rolled back from ${p.version} to ${p.previous}: ${p.reason}`);
}

// == rollback (operator) ==

export async function requestRollback(o: ServiceControl & { root: string; say: Say }): Promise<void> {
  const l = layout(o.root);
  const st = readState(l);
  if (st.pending) {
    if (st.pending.phase === "gating") {
      st.pending.phase = "rollback";
      st.pending.reason = "rollback requested by the operator";
      writeState(l, st);
    }
  } else {
    const cur = linkedVersion(l.current);
    const prev = linkedVersion(l.previous);
    if (!cur || !prev || prev === cur) throw new BundleRefused("refused: there is no previous release to roll back to");
    const last = st.last?.version === cur && st.last.result === "healthy" ? st.last : null;
    writeState(l, {
      pending: {
        version: cur,
        previous: prev,
        data_dir: last?.data_dir ?? "",
        applied_at: new Date().toISOString(),
        deadline_at: new Date().toISOString(),
        health_timeout_s: 0,
        starts: 0,
        max_starts: 0,
        phase: "rollback",
        reason: "rollback requested by the operator",
        backup: last?.backup ?? null,
      },
      last: st.last,
      highest: st.highest,
    });
  }
  o.say("rollback requested; it happens at the next start (`sitegate update check` before the daemon starts)");
  restart(o, o.say);
}

// == status ==

export interface Status {
  root: string;
  current: string | null;
  previous: string | null;
  releases: string[];
  pending: (Pending & { healthy: boolean }) | null;
  last: Outcome | null;
}

export function updateStatus(root: string): Status {
  const l = layout(root);
  const st = readState(l);
  const releases = existsSync(l.releases) ? readdirSync(l.releases).filter(isValidVersion).sort(compareVersions) : [];
  return {
    root,
    current: linkedVersion(l.current),
    previous: linkedVersion(l.previous),
    releases,
    pending: st.pending
      ? { ...st.pending, healthy: st.pending.data_dir !== "" && hasHealthMarker(st.pending.data_dir, st.pending.version) }
      : null,
    last: st.last,
  };
}
