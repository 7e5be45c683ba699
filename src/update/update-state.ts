// The update's state under <root> (default /opt/sitegate), shared by apply, check, rollback
// and status (the daemon reads it for the fleet's status topic):
//   <root>/releases/<version>/   complete releases (unpacked under .tmp-*, fsynced, renamed)
//   <root>/current  -> releases/<version>   what systemd runs (switched by symlink + rename)
//   <root>/previous -> releases/<version>   the last release known to start; its code runs
//                                           `update check` before every start (ExecStartPre)
//   <root>/state/update.json                the pending release and the last outcome
import { chmodSync, mkdirSync, readFileSync } from "node:fs";
import { basename, join } from "node:path";
import { readLinkOrNull, writeFileAtomic } from "./fsx.js";

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

export function writeState(l: Layout, s: UpdateState): void {
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

export function outcome(p: Pending, result: Outcome["result"], reason: string | undefined, now: number): Outcome {
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
