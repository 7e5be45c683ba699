// Commissioning from the status page: one scan or read at a time, run in the background
// with the same code as `sitegate scan` / `sitegate read`; the page polls its progress.
// An endpoint the daemon already polls goes through the daemon's own bus (its queue, so a
// serial port is never opened twice); any other gets a bus of its own, closed when the job
// ends. Scan probes queue below polling, and on a polled bus each probe waits at most
// SHARED_PROBE_TIMEOUT_MS, so polling goes on; every scan stops at a time cap.
import { randomUUID } from "node:crypto";
import { SitegateError, errorMessage } from "../errors.js";
import { Bus, type BusManager } from "../modbus/bus.js";
import { endpointKey, type Endpoint } from "../modbus/endpoint.js";
import type { ProfileRegistry } from "../profiles/registry.js";
import { identifyUnit } from "../profiles/identify.js";
import type { Logger } from "../log.js";
import { systemClock, type Clock } from "../util/clock.js";
import {
  checkEndpoint,
  checkProfile,
  checkScanRange,
  checkUnit,
  readDevice,
  scanUnits,
  type ReadResult,
  type ScanHit,
} from "../devices/commission.js";

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
/** On a bus the daemon polls, a probe holds the line at most this long (a poll waits behind it). */
export const SHARED_PROBE_TIMEOUT_MS = 1000;

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
    private readonly buses: BusManager,
    private readonly profiles: ProfileRegistry,
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
    const ep = checkEndpoint(input.endpoint);
    const asked = checkScanRange(input.from, input.to, input.timeout_ms);
    const shared = this.sharedBus(ep) !== undefined;
    const range = shared ? { ...asked, timeoutMs: Math.min(asked.timeoutMs, SHARED_PROBE_TIMEOUT_MS) } : asked;
    const job = this.begin("scan", String(input.endpoint).trim(), range.to - range.from + 1);
    const cap = new AbortController();
    const stop = () => cap.abort();
    this.abort.signal.addEventListener("abort", stop);
    const timer = this.clock.setTimer(stop, this.scanCapMs);
    let capped = false;
    this.run(
      job,
      ep,
      async (bus) => {
        try {
          job.found = await scanUnits(
            bus,
            range,
            (p) => {
              job.probed = p.probed;
              job.found = [...p.found];
            },
            cap.signal,
          );
          capped = cap.signal.aborted && !this.abort.signal.aborted && job.probed < job.total;
          if (!this.abort.signal.aborted) await this.identify(bus, job, range.timeoutMs);
          if (capped)
            job.error = `stopped at the ${Math.round(this.scanCapMs / 1000)} s time cap after ${job.probed} of ${job.total} unit ids; scan the rest with from ${range.from + job.probed}`;
        } finally {
          this.clock.clearTimer(timer);
          this.abort.signal.removeEventListener("abort", stop);
        }
      },
      () => ({ shared, timeout_ms: range.timeoutMs, capped }),
    );
    return job;
  }

  /** Names the profile each unit found matches (the specific ones first), so the installer picks it for configure. */
  private async identify(bus: Bus, job: Job, timeoutMs: number): Promise<void> {
    for (const hit of job.found) {
      if (this.abort.signal.aborted) return;
      hit.profiles = (await identifyUnit(bus, hit.unit, this.profiles, timeoutMs)).map((m) => m.profile);
    }
  }

  read(input: { endpoint?: unknown; unit?: unknown; profile?: unknown }): Job {
    const ep = checkEndpoint(input.endpoint);
    const unit = checkUnit(input.unit);
    const profile = checkProfile(this.profiles, input.profile);
    const job = this.begin("read", String(input.endpoint).trim(), 1);
    this.run(job, ep, async (bus) => {
      job.result = await readDevice(bus, job.endpoint, unit, this.profiles, profile);
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

  private sharedBus(ep: Endpoint): Bus | undefined {
    return this.buses.all().find((b) => b.key === endpointKey(ep));
  }

  private run(job: Job, ep: Endpoint, work: (bus: Bus) => Promise<void>, extra: () => Record<string, unknown> = () => ({})): void {
    const shared = this.sharedBus(ep);
    const bus = shared ?? new Bus(ep, this.log.child({ bus: endpointKey(ep), commissioning: true }));
    this.running = (async () => {
      try {
        await work(bus);
        job.state = "done";
      } catch (e) {
        job.state = "failed";
        job.error = errorMessage(e);
      } finally {
        job.finished_at = new Date().toISOString();
        if (!shared) await bus.close().catch(() => undefined);
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
