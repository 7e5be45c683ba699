// The part contract (start, stop, metrics, health) and the lifecycle that runs the parts:
// start in the order added, stop in reverse (a failing stop() does not keep the others
// from stopping), retry with backoff a part that fails to start, and fail the daemon's
// start only for an essential part (storage, api). Which parts are essential, and why:
// docs/architecture.md ("Essential parts").
import type { Logger } from "./log.js";
import { SitegateError, errorMessage } from "./errors.js";
import { systemClock, within, type Clock } from "./util/clock.js";

import type { HealthWarning, MetricFamily } from "./metrics.js";
export type { HealthWarning, MetricFamily } from "./metrics.js";

/** A part's own view of its health: no warnings while it does its job. */
export interface PartHealth {
  warnings: HealthWarning[];
}

export interface Part {
  readonly name: string;
  start(): Promise<void> | void;
  /**
   * Also called after a failed start(), so the part releases what it took before the retry.
   * `budgetMs`: how long the lifecycle waits for this part before it gives up on it.
   */
  stop(budgetMs?: number): Promise<void> | void;
  /** The Prometheus families of the figures this part owns. */
  metrics?(): MetricFamily[];
  health?(): PartHealth;
}

export interface PartOptions {
  /** A failed start fails the daemon's start instead of being retried (see the top of this file). */
  essential?: boolean;
}

/** Delays between start attempts of a part that is not essential: doubling from firstMs up to maxMs. */
export interface RetryPolicy {
  firstMs: number;
  maxMs: number;
}

export const START_RETRY: RetryPolicy = { firstMs: 1000, maxMs: 5 * 60_000 };

/**
 * The clean stop's budget: the one figure every stop bound derives from. All parts share
 * it (each gets what the parts before it left), dispatch puts the devices back within it,
 * `run` exits STOP_EXIT_MS after the signal whatever happens, and the unit's
 * TimeoutStopSec sits above that. Sized for four batteries on one 9600 baud RTU bus, each
 * with up to three registers to restore: 1.6 s when they answer, and 24 s when none does
 * (a write that times out costs 2 s on RTU: the 1 s timeout, then as long again for a late
 * answer to clear the line); the other 6 s are for the other parts (docs/operating.md).
 */
export const STOP_BUDGET_MS = 30_000;

/** Of the stop budget, what a stop waits at most for starts still in flight (5 s of 30). */
const START_WAIT_SHARE = 1 / 6;

/** When `run` exits even if a stop hangs outside any part's bound: the budget and time to close the files and log. */
export const STOP_EXIT_MS = STOP_BUDGET_MS + 2_000;

interface Entry {
  part: Part;
  essential: boolean;
  running: boolean;
  failures: number;
  lastError: string | null;
  timer: unknown;
  attempt: Promise<unknown> | null;
}

export class Lifecycle {
  private readonly entries: Entry[] = [];
  /** Every part by name. */
  readonly parts = new Map<string, Part>();
  private stopping: Promise<void> | null = null;

  constructor(
    private readonly log: Logger,
    private readonly retry: RetryPolicy = START_RETRY,
    /** Retry delays and stop budgets run on it (tests move a FakeClock). */
    private readonly clock: Clock = systemClock,
  ) {}

  add<T extends Part>(part: T, opts: PartOptions = {}): T {
    if (this.parts.has(part.name)) throw new SitegateError("INTERNAL", `two parts named ${part.name}`);
    this.parts.set(part.name, part);
    this.entries.push({
      part,
      essential: opts.essential === true,
      running: false,
      failures: 0,
      lastError: null,
      timer: null,
      attempt: null,
    });
    return part;
  }

  /**
   * Starts every part in order. A part that is not essential and fails is retried later;
   * an essential one stops the parts already started and its error is rethrown.
   */
  async start(): Promise<void> {
    for (const e of this.entries) {
      if (this.stopping) return;
      // Kept on the entry so a stop() that comes meanwhile waits for it, then stops the part.
      e.attempt = this.attempt(e);
      const err = await e.attempt;
      e.attempt = null;
      if (err === null) continue;
      if (e.essential) {
        await this.stop();
        throw err;
      }
      this.retryLater(e);
    }
  }

  /** One start of one part: null when it runs, else the error (the part was stopped again). */
  private async attempt(e: Entry): Promise<unknown> {
    try {
      await e.part.start();
    } catch (err) {
      e.failures++;
      e.lastError = errorMessage(err);
      this.log.error({ part: e.part.name, err, essential: e.essential, failures: e.failures }, "part failed to start");
      await this.stopPart(e.part);
      return err;
    }
    e.running = true;
    if (e.failures > 0) this.log.info({ part: e.part.name, failures: e.failures }, "part started after failed attempts");
    else this.log.debug({ part: e.part.name }, "started");
    e.lastError = null;
    return null;
  }

  private retryLater(e: Entry): void {
    const delay = Math.min(this.retry.maxMs, this.retry.firstMs * 2 ** Math.min(30, e.failures - 1));
    this.log.warn({ part: e.part.name, retry_in_ms: delay }, "part not running; its start is retried");
    e.timer = this.clock.setTimer(() => {
      e.timer = null;
      e.attempt = this.attempt(e).then((err) => {
        e.attempt = null;
        if (err !== null && !this.stopping) this.retryLater(e);
      });
    }, delay);
    // The retry never keeps the process alive on its own; stop() clears it.
    (e.timer as Partial<NodeJS.Timeout> | null)?.unref?.();
  }

  /**
   * Stops the running parts in reverse order and cancels pending retries, all within
   * `budgetMs` (each part gets what the ones before it left); safe to call twice.
   */
  stop(budgetMs = STOP_BUDGET_MS): Promise<void> {
    this.stopping ??= (async () => {
      const deadline = this.clock.mono() + budgetMs;
      const left = () => Math.max(0, Math.round(deadline - this.clock.mono()));
      for (const e of this.entries) {
        if (e.timer !== null) this.clock.clearTimer(e.timer);
        e.timer = null;
      }
      // A start in flight (a listener binding, a first connect) gets a share of the budget
      // only: the rest is for the parts that run, dispatch putting the devices back first.
      await this.settled(Math.min(left(), Math.round(budgetMs * START_WAIT_SHARE)));
      for (const e of [...this.entries].reverse()) {
        if (!e.running) continue;
        e.running = false;
        await this.stopPart(e.part, left());
      }
    })();
    return this.stopping;
  }

  /** Waits for the starts in flight, but not for one that hangs. */
  private async settled(timeoutMs: number): Promise<void> {
    const attempts = this.entries.flatMap((e) => (e.attempt ? [e.attempt] : []));
    await within(this.clock, Promise.all(attempts), timeoutMs);
  }

  /** A synchronous stop() always completes; an asynchronous one is given up after `budgetMs`. */
  private async stopPart(part: Part, budgetMs = STOP_BUDGET_MS): Promise<void> {
    let timer: unknown = null;
    try {
      await Promise.race([
        Promise.resolve().then(() => part.stop(budgetMs)),
        new Promise((_, reject) => {
          timer = this.clock.setTimer(() => reject(new SitegateError("TIMEOUT", `stop timed out after ${budgetMs} ms`)), budgetMs);
        }),
      ]);
      this.log.debug({ part: part.name }, "stopped");
    } catch (e) {
      this.log.error({ part: part.name, err: e }, "part failed to stop cleanly");
    } finally {
      this.clock.clearTimer(timer);
    }
  }

  /** The union of the parts' metrics(), and whether each part runs; a part whose metrics() throws is left out and logged. */
  metrics(): MetricFamily[] {
    const out: MetricFamily[] = [
      {
        name: "sitegate_part_up",
        help: "1 while the part runs, 0 while its start is being retried",
        type: "gauge",
        values: this.entries.map((e) => ({ labels: { part: e.part.name }, value: e.running ? 1 : 0 })),
      },
      {
        name: "sitegate_part_start_failures_total",
        help: "failed starts of the part",
        type: "counter",
        values: this.entries.map((e) => ({ labels: { part: e.part.name }, value: e.failures })),
      },
    ];
    for (const e of this.entries) out.push(...this.ask(e.part, "metrics", () => e.part.metrics?.() ?? []));
    return out;
  }

  /** The union of the parts' health() warnings, and one for each part not running after a failed start. */
  warnings(): HealthWarning[] {
    const out: HealthWarning[] = [];
    for (const e of this.entries) {
      if (!e.running && e.failures > 0)
        out.push({
          code: "part_not_running",
          message: `${e.part.name} is not running after ${e.failures} failed start${e.failures === 1 ? "" : "s"} (${e.lastError}); retrying`,
        });
      out.push(...this.ask(e.part, "health", () => e.part.health?.().warnings ?? []));
    }
    return out;
  }

  private ask<T>(part: Part, what: string, fn: () => T[]): T[] {
    try {
      return fn();
    } catch (err) {
      this.log.warn({ part: part.name, err: errorMessage(err) }, `part's ${what}() failed`);
      return [];
    }
  }
}
