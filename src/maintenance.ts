// Recurring maintenance on plain timers (util/utc-schedule.ts), never in the hot path:
//   03:30 daily    (config maintenance: {at, timezone}; default 03:30 in the controller's
//                  local time) WAL checkpoint and PRAGMA optimize: sitegate.db's WAL file
//                  shrinks back to zero while nothing else is busy (telemetry's keeps its
//                  blocks), and the query planner's statistics stay fresh.
//   every 60 min   retention sweep: settled telemetry rows deleted; their pages are reused,
//                  and given back to the file system (VACUUM) only when a drained backlog left
//                  most of the file free. The size bound itself is kept on every commit. The
//                  deletes go into the next telemetry commit (a transaction of their own
//                  would cost the card what a commit costs: docs/sd-card.md); hourly is often
//                  enough.
//   06:00 daily    and at start: the HTTPS certificate's expiry; within 14 days a warning
//                  in the log and in /healthz (warnings[]), every day until it is replaced.
import { readFileSync } from "node:fs";
import { X509Certificate } from "node:crypto";
import type { Config } from "./config/schema.js";
import type { HealthWarning, Part, PartHealth } from "./lifecycle.js";
import type { Logger } from "./log.js";
import type { StoragePart } from "./storage/part.js";
import type { SampleStore } from "./telemetry/sample-store.js";
import { SitegateError, errorMessage } from "./errors.js";
import { zoneProblem } from "./config/zones.js";
import { dailyInZone, dailyLocal, dailyUtc, everyMinutes, UtcJob, type UtcRecurrence } from "./util/utc-schedule.js";

/** Free bytes in telemetry.db from which the sweep gives them back (after a backlog drained). */
export const FREE_TO_VACUUM = 1024 * 1024;

export const SCHEDULE = {
  checkpoint: dailyUtc("03:30"),
  retention: everyMinutes(60),
  certificate: dailyUtc("06:00"),
} as const;

/**
 * The schedule for a config's `maintenance`: the nightly job at `at` in the controller's local
 * time ("local", the default), in UTC, or in a named zone (through Intl; the process's TZ is
 * left alone, so nothing else in the daemon changes its idea of local time).
 */
export function maintenanceSchedule(
  m: { at: string; timezone: string } = { at: "03:30", timezone: "UTC" },
): Record<keyof typeof SCHEDULE, UtcRecurrence> {
  const { at, timezone } = m;
  if (timezone === "UTC") return { ...SCHEDULE, checkpoint: dailyUtc(at) };
  if (timezone === "local") return { ...SCHEDULE, checkpoint: dailyLocal(at) };
  // The config refused it already (check-config too); a caller that skipped the config does not get UTC silently.
  const problem = zoneProblem(timezone);
  if (problem) throw new SitegateError("CONFIG_INVALID", `maintenance.timezone ${timezone}: ${problem}`);
  return { ...SCHEDULE, checkpoint: dailyInZone(at, timezone) };
}

export const CERT_WARN_DAYS = 14;
const DAY_MS = 86_400_000;

/** A warning when the certificate expires within `days` (or has expired); else null. */
export function certificateWarning(pem: string | Buffer, file: string, now = Date.now(), days = CERT_WARN_DAYS): HealthWarning | null {
  const cert = new X509Certificate(pem);
  const expires = Date.parse(cert.validTo);
  const left = (expires - now) / DAY_MS;
  if (left >= days) return null;
  const when = new Date(expires).toISOString();
  return left <= 0
    ? { code: "tls_cert_expired", message: `the HTTPS certificate ${file} expired at ${when}` }
    : { code: "tls_cert_expiring", message: `the HTTPS certificate ${file} expires at ${when}, in ${Math.floor(left)} days` };
}

export class Maintenance implements Part {
  readonly name = "maintenance";
  private jobs: UtcJob[] = [];
  private certWarning: HealthWarning | null = null;

  constructor(
    private readonly config: Config,
    private readonly storage: StoragePart,
    private readonly samples: SampleStore,
    private readonly log: Logger,
  ) {}

  start(): void {
    this.checkCertificate();
    const schedule = maintenanceSchedule(this.config.maintenance);
    const job = (name: keyof typeof SCHEDULE, fn: () => void) =>
      new UtcJob(schedule[name], () => {
        try {
          fn();
        } catch (e) {
          this.log.error({ job: name, err: errorMessage(e) }, "maintenance job failed");
        }
      });
    this.jobs = [
      job("checkpoint", () => this.checkpoint()),
      job("retention", () => this.sweep()),
      job("certificate", () => this.checkCertificate()),
    ];
    for (const j of this.jobs) j.start();
    this.log.info({ schedule: Object.fromEntries(Object.entries(schedule).map(([k, r]) => [k, r.text])) }, "maintenance scheduled");
  }

  /**
   * WAL checkpoint and PRAGMA optimize, of both databases. sitegate.db's WAL is truncated;
   * telemetry.db's keeps its size (RESTART: the next commit writes from its start, over blocks
   * the file already has; storage/db.ts preallocateWal).
   */
  checkpoint(): void {
    for (const [db, mode] of [
      [this.storage.db, "TRUNCATE"],
      [this.storage.telemetryDb, "RESTART"],
    ] as const) {
      const started = performance.now();
      const [r] = db.pragma(`wal_checkpoint(${mode})`) as Array<{ busy: number; log: number; checkpointed: number }>;
      db.pragma("optimize");
      this.log.info({ db: db.name, ...r, ms: Math.round(performance.now() - started) }, "nightly checkpoint and optimize");
    }
  }

  /**
   * Settled telemetry rows deleted. Their pages stay in telemetry.db for the next rows (a
   * file that only grows to its working size writes nothing to give pages back and take them
   * again); when a drained backlog leaves most of the file free (at least FREE_TO_VACUUM
   * bytes), VACUUM gives the free pages back to the file system, rewriting only what is left.
   * With a telemetry commit due, the deletes go into it (SampleStore.sweep), so the free
   * pages this looks at are those the sweeps before freed.
   */
  sweep(): void {
    this.samples.sweep();
    const db = this.storage.telemetryDb;
    const free = db.pragma("freelist_count", { simple: true }) as number;
    const pages = db.pragma("page_count", { simple: true }) as number;
    const pageSize = db.pragma("page_size", { simple: true }) as number;
    const vacuum = free * pageSize >= FREE_TO_VACUUM && free * 2 >= pages;
    if (vacuum) db.exec("VACUUM");
    this.log.debug({ free_pages: free, pages, vacuum }, "retention sweep");
  }

  checkCertificate(now = Date.now()): HealthWarning | null {
    const file = this.config.http.tls.cert;
    try {
      this.certWarning = certificateWarning(readFileSync(file), file, now);
    } catch (e) {
      this.certWarning = { code: "tls_cert_unreadable", message: `the HTTPS certificate ${file} cannot be read: ${errorMessage(e)}` };
    }
    if (this.certWarning) this.log.warn({ code: this.certWarning.code, cert: file }, this.certWarning.message);
    return this.certWarning;
  }

  warnings(): HealthWarning[] {
    return this.certWarning ? [this.certWarning] : [];
  }

  health(): PartHealth {
    return { warnings: this.warnings() };
  }

  stop(): void {
    for (const j of this.jobs) j.stop();
    this.jobs = [];
  }
}
