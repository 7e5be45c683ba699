// The release health gate, daemon side: once the daemon runs, its database answers and
// (when devices exist) a first poll succeeded, it writes `<data_dir>/update/healthy-<version>`.
// `sitegate update check` reads that marker to keep a freshly installed release or roll it
// back. Kept free of heavy imports: the daemon loads it at every start.
import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { Part } from "../lifecycle.js";
import type { Logger } from "../log.js";
import { exists, writeFileAtomic } from "./fsx.js";

export function healthMarkerPath(dataDir: string, version: string): string {
  return join(dataDir, "update", `healthy-${version}`);
}

/** Writes the health marker of `version` (temp file, fsync, rename). */
export function writeHealthMarker(dataDir: string, version: string, now = new Date()): string {
  const path = healthMarkerPath(dataDir, version);
  mkdirSync(join(dataDir, "update"), { recursive: true });
  writeFileAtomic(path, JSON.stringify({ version, healthy_at: now.toISOString(), pid: process.pid }) + "\n");
  return path;
}

export function hasHealthMarker(dataDir: string, version: string): boolean {
  return exists(healthMarkerPath(dataDir, version));
}

export function removeHealthMarker(dataDir: string, version: string): void {
  rmSync(healthMarkerPath(dataDir, version), { force: true });
}

/** What the gate asks of the daemon: the daemon answers with its health monitor's isHealthy (src/health.ts). */
export interface HealthProbe {
  healthy(): boolean;
}

/** Started last; checks the probe after start() has returned and writes the marker once. */
export class ReleaseHealthPart implements Part {
  readonly name = "release-health";
  private timer: NodeJS.Timeout | null = null;
  written = false;

  constructor(
    private readonly dataDir: string,
    private readonly version: string,
    private readonly probe: HealthProbe,
    private readonly log: Logger,
    private readonly intervalMs = 1000,
  ) {}

  start(): void {
    const tick = () => {
      if (this.written || !this.probe.healthy()) return;
      try {
        const path = writeHealthMarker(this.dataDir, this.version);
        this.written = true;
        this.log.info({ version: this.version, path }, "release healthy");
        this.stop();
      } catch (e) {
        this.log.warn({ err: e }, "cannot write the release health marker");
      }
    };
    setImmediate(tick).unref?.();
    this.timer = setInterval(tick, this.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }
}
