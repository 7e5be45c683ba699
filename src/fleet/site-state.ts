// The fleet's retained state topics: `status` (what runs, the last update's outcome) and
// `devices` (the device sync view), published when they change, or always on a new
// connection (the broker may have lost its retained copies).
import { deviceSyncView, syncedDevices } from "../services/devices.js";
import { errorMessage } from "../errors.js";
import { VERSION } from "../version.js";
import { statSync } from "node:fs";
import { DEFAULT_ROOT, layout, readState } from "../update/install.js";
import type { CommandDeps } from "./commands.js";
import type { QoS1 } from "./command-inbox.js";

export type SiteStateDeps = Pick<CommandDeps, "devices" | "config" | "log"> & {
  dispatch: { running(): number };
  /** The /healthz warnings, carried in the status (it is republished when their codes change). */
  warnings?: () => ReadonlyArray<{ code: string; message: string }>;
};

export class SiteState {
  private lastStatus = "";
  private lastDevices = "";

  constructor(
    private readonly deps: SiteStateDeps,
    private readonly topic: (sub: string) => string,
    private readonly qos1: QoS1,
    private readonly startedAt: number,
  ) {}

  /** Retained `status` and `devices`, published when they change (or always, on a new connection). */
  publish(force: boolean): void {
    const { deps } = this;
    const listed = syncedDevices(deps.devices);
    const devices = JSON.stringify(deviceSyncView(deps.config.site_id, listed));
    const running = deps.dispatch.running();
    const lastUpdate = lastUpdateOutcome();
    const warnings = deps.warnings?.() ?? [];
    // Codes only: a warning's message may count seconds, and the retained status is not rewritten for that.
    const codes = warnings.map((w) => w.code).join(",");
    const statusKey = `${listed.length}/${running}/${lastUpdate?.at ?? ""}/${lastUpdate?.result ?? ""}/${codes}`;
    if (force || statusKey !== this.lastStatus) {
      this.lastStatus = statusKey;
      const status = {
        state: "online",
        site_id: deps.config.site_id,
        version: VERSION,
        started_at: new Date(this.startedAt).toISOString(),
        uptime_s: Math.round((Date.now() - this.startedAt) / 1000),
        devices: listed.length,
        running_events: running,
        last_update: lastUpdate,
        warnings: warnings.map((w) => ({ code: w.code, message: w.message })),
        at: new Date().toISOString(),
      };
      this.qos1(this.topic("status"), JSON.stringify(status), { retain: true }, (err) => {
        if (err) deps.log.warn({ err: errorMessage(err) }, "status not accepted by the broker");
      });
    }
    if (force || devices !== this.lastDevices) {
      this.lastDevices = devices;
      this.qos1(this.topic("devices"), devices, { retain: true }, (err) => {
        if (err) deps.log.warn({ err: errorMessage(err) }, "device view not accepted by the broker");
      });
    }
  }
}

/**
 * The last update's outcome (applied and healthy, rolled back, abandoned, or a fleet request
 * refused) from the update state root keeps under /opt/sitegate/state (SITEGATE_ROOT in
 * tests); null when there is none or it cannot be read.
 */
function lastUpdateOutcome(): LastUpdate {
  // publishState runs on every snapshot: the file is read again only when it changed.
  const l = layout(process.env.SITEGATE_ROOT ?? DEFAULT_ROOT);
  let stamp = "";
  try {
    const st = statSync(l.stateFile);
    stamp = `${l.stateFile}:${st.mtimeMs}:${st.size}`;
  } catch {
    return null;
  }
  if (stamp === lastUpdateCache.stamp) return lastUpdateCache.value;
  const last = readState(l).last;
  const value = last ? { version: last.version, result: last.result, ...(last.reason ? { reason: last.reason } : {}), at: last.at } : null;
  lastUpdateCache = { stamp, value };
  return value;
}

type LastUpdate = { version: string; result: string; reason?: string; at: string } | null;
let lastUpdateCache: { stamp: string; value: LastUpdate } = { stamp: "", value: null };
