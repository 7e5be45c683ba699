// `update apply`: takes a signed bundle into a private copy, verifies it (bundle-checks.ts),
// unpacks it into releases/ (stage-release.ts), has the unpacked release's own check-config
// accept the site's config (release-config.ts) and switches `current` to it. The release
// then gates: it must write its health marker (<data_dir>/update/healthy-<version>) within
// the deadline and within max_starts starts, or the next `update check` switches back
// (release-gate.ts). The layout under <root> is in update-state.ts.
import { statSync } from "node:fs";
import { BundleRefused, checkSignature, compareVersions, loadTrustedKeys, sha256OfRange } from "./bundle-format.js";
import { checkFreeSpace, checkManifest, checkPayload, checkPrivateDir, checkRunsHere, checkVersionFloor } from "./bundle-checks.js";
import { backupBound, checkDataDir, prepareDataDir } from "./data-dir.js";
import { removeTree, symlinkAtomic } from "./fsx.js";
import { DEFAULT_MAX_BUNDLE_BYTES, Incoming, receiveFile, receiveUrl, removeStaleIncoming, type ReceivedBundle } from "./receive.js";
import { checkUpdate } from "./release-gate.js";
import { alive, bootId, restart, type Say, type ServiceControl } from "./service-control.js";
import { checkReleaseConfig } from "./release-config.js";
import { placeRelease, pruneReleases, stageRelease } from "./stage-release.js";
import {
  layout,
  linkedVersion,
  readState,
  recordRefused,
  writeState,
  type Layout,
  type Pending,
  type UpdateState,
} from "./update-state.js";
import { testHook } from "../util/test-hooks.js";

export const DEFAULT_ROOT = "/opt/sitegate";
export const DEFAULT_KEYS_DIR = "/etc/sitegate/update-keys";
export const DEFAULT_RESTART_CMD = "systemctl reset-failed sitegate.service 2>/dev/null; systemctl restart sitegate.service";
export { DB_FILE } from "../storage/files.js";
export { DEFAULT_MAX_BUNDLE_BYTES } from "./receive.js";
export { checkUpdate, requestRollback, updateStatus, type CheckOptions, type CheckResult, type Status } from "./release-gate.js";
export type { ServiceControl } from "./service-control.js";
export {
  layout,
  linkedVersion,
  readState,
  recordRefused,
  type Layout,
  type Outcome,
  type Pending,
  type UpdateState,
} from "./update-state.js";

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
  /** the site's config: the new release's own check-config must accept it before the switch (none: not checked, said so) */
  config?: string;
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
  // A release with migrations may need a backup of the database (prepareDataDir below): its room is counted too.
  const migrates = cur !== null && Object.keys(m.migrations ?? {}).length > 0;
  checkFreeSpace(l.root, m.unpacked_size, migrates ? { dir: o.dataDir, bytes: backupBound(o.dataDir) } : undefined);
  o.say(`bundle ${m.version} (${m.arch}) signed by ${signer}, payload ${m.payload_sha256.slice(0, 12)}… ok`);
  await testHook("verified");

  // Nothing has changed so far (a refusal of the staged release's check-config removes it
  // again). From here on every step leaves `current` at a complete release.
  const staged = await stageRelease(b, l);
  checkStagedConfig(staged, b, l, o);
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

/** The staged release's own check-config against the site's config; a refusal removes it, is recorded as the last outcome and thrown. */
function checkStagedConfig(staged: string, b: ReceivedBundle, l: Layout, o: ApplyOptions): void {
  const m = b.manifest;
  if (!o.config) {
    o.say(`no site config given: release ${m.version} is installed without checking it against one (--config FILE)`);
    return;
  }
  try {
    checkReleaseConfig(staged, m, { file: o.config, dataDir: o.dataDir, say: o.say });
  } catch (e) {
    removeTree(staged);
    if (e instanceof BundleRefused) recordRefused(l.root, m.version, e.message, o.dataDir);
    throw e;
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
