// Commissioning from the status page: one scan or read at a time, run in the background
// with the same code as `sitegate scan` / `sitegate read`; the page polls its progress.
// The page asks a `Commissioning` (the composition root gives it the Modbus family's) for
// input checks and a link to the port; which link that is (the daemon's own bus, so polling
// goes on, or one of its own) is the family's business. Every scan stops at a time cap.
import { randomUUID } from "node:crypto";
import { SitegateError, errorMessage } from "../errors.js";
import type { Logger } from "../log.js";
import { systemClock, type Clock } from "../util/clock.js";
import type { Commissioning, CommissioningLink, ReadResult, ScanHit, ScanPlan } from "../model/commissioning.js";

export interface Job {
  id: string;
  kind: "scan" | "read";
  endpoint: string;
  state: "running" | "done" | "failed";
  probed: number;
  total: number;
  /** Who answered; once the scan is through, `profiles` names what each one's identity registers match (as `sitegate scan --identify`). */
  found: Array<ScanHit & { profiles?: string[] }>;
  result: ReadResult | null;
  error: string | null;
  started_at: string;
  finished_at: string | null;
}

/** A scan or read is already running: answered 409 (services/errors.ts), worth trying again later. */
export class BusyError extends SitegateError {
  constructor(message: string) {
    super("BUSY", message, { transient: true });
  }
}

/** A status-page scan stops after this long (247 probes at 1 s plus the polls between them fit). */
export const SCAN_CAP_MS = 5 * 60_000;

export interface JobsOptions {
  scanCapMs?: number;
  clock?: Clock;
}

export class Jobs {
  private current: Job | null = null;
  private readonly abort = new AbortController();
  private running: Promise<void> = Promise.resolve();
  private readonly scanCapMs: number;
  private readonly clock: Clock;

  constructor(
    private readonly commissioning: Commissioning,
    private readonly log: Logger,
    opts: JobsOptions = {},
  ) {
    this.scanCapMs = opts.scanCapMs ?? SCAN_CAP_MS;
    this.clock = opts.clock ?? systemClock;
  }

  get(): Job | null {
    return this.current;
  }

  /** Validates (throws ProbeInputError with a message for the page) and starts a scan. */
  scan(input: { endpoint?: unknown; from?: unknown; to?: unknown; timeout_ms?: unknown }): Job {
    const plan = this.commissioning.checkScan(input);
    const job = this.begin("scan", plan.endpoint, plan.to - plan.from + 1);
    const cap = new AbortController();
    const stop = () => cap.abort();
    this.abort.signal.addEventListener("abort", stop);
    const timer = this.clock.setTimer(stop, this.scanCapMs);
    let capped = false;
    this.run(
      job,
      async (link) => {
        try {
          job.found = await link.scan(
            plan,
            (p) => {
              job.probed = p.probed;
              job.found = [...p.found];
            },
            cap.signal,
          );
          capped = cap.signal.aborted && !this.abort.signal.aborted && job.probed < job.total;
          if (!this.abort.signal.aborted) await this.identify(link, job, plan);
          if (capped)
            job.error = `stopped at the ${Math.round(this.scanCapMs / 1000)} s time cap after ${job.probed} of ${job.total} unit ids; scan the rest with from ${plan.from + job.probed}`;
        } finally {
          this.clock.clearTimer(timer);
          this.abort.signal.removeEventListener("abort", stop);
        }
      },
      () => ({ shared: plan.shared, timeout_ms: plan.timeoutMs, capped }),
    );
    return job;
  }

  /** Names the profile each unit found matches (the specific ones first), so the installer picks it for configure. */
  private async identify(link: CommissioningLink, job: Job, plan: ScanPlan): Promise<void> {
    for (const hit of job.found) {
      if (this.abort.signal.aborted) return;
      hit.profiles = await link.identify(hit.unit, plan.timeoutMs);
      hit.words = link.describe?.(hit) ?? `unit ${hit.unit}: answers`;
    }
  }

  read(input: { endpoint?: unknown; unit?: unknown; profile?: unknown }): Job {
    const plan = this.commissioning.checkRead(input);
    const job = this.begin("read", plan.endpoint, 1);
    this.run(job, async (link) => {
      job.result = await link.read(plan);
      job.probed = 1;
    });
    return job;
  }

  private begin(kind: Job["kind"], endpoint: string, total: number): Job {
    if (this.current?.state === "running") throw new BusyError("a scan or read is already running; wait for it to finish");
    this.current = {
      id: randomUUID(),
      kind,
      endpoint,
      state: "running",
      probed: 0,
      total,
      found: [],
      result: null,
      error: null,
      started_at: new Date().toISOString(),
      finished_at: null,
    };
    return this.current;
  }

  private run(job: Job, work: (link: CommissioningLink) => Promise<void>, extra: () => Record<string, unknown> = () => ({})): void {
    const link = this.commissioning.open(job.endpoint);
    this.running = (async () => {
      try {
        await work(link);
        job.state = "done";
      } catch (e) {
        job.state = "failed";
        job.error = errorMessage(e);
      } finally {
        job.finished_at = new Date().toISOString();
        await link.close().catch(() => undefined);
        this.log.info(
          { kind: job.kind, endpoint: job.endpoint, state: job.state, probed: job.probed, found: job.found.length, ...extra() },
          "commissioning job finished",
        );
      }
    })();
  }

  async stop(): Promise<void> {
    this.abort.abort();
    await this.running;
  }
}
