// Before the switch: the staged release's own `check-config` against this site's config, run
// as the unit runs it before every start (ExecStartPre): the release's runtime (or, for a
// release without one, this Node.js), --jitless, as the data dir's owner (the daemon's user).
// A release whose schema refuses the config would not start and would be rolled back by the
// health gate after its starts; it is refused here instead, with check-config's own words as
// the reason, before `current` moves.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { BundleRefused, type Manifest } from "./bundle-format.js";
import { runAsOwner } from "./data-dir.js";
import type { Say } from "./service-control.js";

/** check-config loads the config and its files; it runs in well under a second (scrypt for example secrets). */
const CHECK_TIMEOUT_MS = 120_000;
/** The reason keeps the first lines of check-config's answer (each problem is a line). */
const REASON_MAX_CHARS = 2000;

export interface ConfigCheck {
  /** The site's config (`--config`, /etc/sitegate/config.yaml) */
  file: string;
  /** The data dir: its owner runs the check, as the unit's User= runs the daemon. */
  dataDir: string;
  say: Say;
}

/** Throws BundleRefused with check-config's output when the staged release refuses the site's config. */
export function checkReleaseConfig(staged: string, m: Manifest, c: ConfigCheck): void {
  const node = m.runtime === true ? join(staged, "node", "bin", "node") : process.execPath;
  const args = ["--jitless", join(staged, "dist", "src", "cli.js"), "check-config", "--config", c.file];
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH ?? "/usr/bin:/bin", NODE_ENV: "production", LOG_FORMAT: "json" };
  if (process.env.TZ !== undefined) env.TZ = process.env.TZ;
  // A first install may come before the data dir: then as this user (root's "/").
  const r = runAsOwner(existsSync(c.dataDir) ? c.dataDir : "/", node, args, { timeoutMs: CHECK_TIMEOUT_MS, env });
  if (r.status === 0) {
    c.say(`release ${m.version} accepts the config ${c.file} (its own check-config)`);
    return;
  }
  const why = r.error
    ? r.error.message
    : r.signal
      ? `killed by ${r.signal}${r.signal === "SIGKILL" ? ` (not done within ${CHECK_TIMEOUT_MS / 1000} s)` : ""}`
      : `exit ${r.status}`;
  const output = `${r.stderr ?? ""}${r.stdout ?? ""}`.trim();
  const text = output.length > REASON_MAX_CHARS ? `${output.slice(0, REASON_MAX_CHARS)}…` : output;
  throw new BundleRefused(
    `refused: release ${m.version} does not accept this site's config ${c.file} (its check-config, as uid ${r.uid}: ${why})${text ? `:\n${text}` : ""}`,
  );
}
