// The gate after an apply: `update check` before every start (and from a timer) keeps a
// release that wrote its health marker in time and switches back one that did not;
// `update rollback` asks for that switch; `update status` shows where things stand.
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { BundleRefused, compareVersions, isValidVersion } from "./bundle-format.js";
import { restoreDataDir } from "./data-dir.js";
import { exists, symlinkAtomic } from "./fsx.js";
import { hasHealthMarker } from "./health-marker.js";
import { alive, bootId, restart, type Say, type ServiceControl } from "./service-control.js";
import {
  layout,
  linkedVersion,
  outcome,
  readState,
  writeState,
  type Layout,
  type Outcome,
  type Pending,
  type UpdateState,
} from "./update-state.js";

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
