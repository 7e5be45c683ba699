// Each device's one lane of dispatch jobs (writes, releases, read-backs: one at a time, in
// the order asked), and the putting back of devices from the ledger. A release that does
// not read back keeps its ledger row and the device's remote mode, and is tried again
// with backoff (1 s doubling to 60 s) until it does (B4 "Closed loop"); an operator can
// ask for it at once (`sitegate devices release`).
import { errorMessage } from "../errors.js";
import type { Logger } from "../log.js";
import { within, type Clock } from "../util/clock.js";
import { testHook } from "../util/test-hooks.js";
import type { Ledger } from "./ledger.js";
import { ReleaseBackoff } from "./release-backoff.js";

const PUT_BACK_RETRY_MS = 250;

export interface DeviceJobsDeps {
  clock: Clock;
  log: Logger;
  ledger: () => Ledger;
  stats: { releases_ok: number; releases_failed: number };
  setRemote(id: string, remote: boolean): void;
}

export class DeviceJobs {
  private readonly chains = new Map<string, Promise<void>>();
  /** Devices with a release queued or under way. */
  readonly releasing = new Set<string>();
  /** When a device whose release did not read back is tried again. */
  readonly backoff = new ReleaseBackoff();
  stopping = false;

  constructor(private readonly deps: DeviceJobsDeps) {}

  /** Queues a job behind the device's earlier ones. */
  chain(id: string, job: () => Promise<void>): void {
    const next = (this.chains.get(id) ?? Promise.resolve()).then(job);
    this.chains.set(id, next);
    void next.finally(() => {
      if (this.chains.get(id) === next) this.chains.delete(id);
    });
  }

  /** Waits, at most `timeoutMs`, for the jobs queued or under way on these devices. */
  async settle(ids: readonly string[], timeoutMs: number): Promise<void> {
    const pending = ids.map((id) => this.chains.get(id)).filter((p) => p !== undefined);
    if (pending.length) await within(this.deps.clock, Promise.allSettled(pending), timeoutMs);
  }

  /**
   * Puts a device back from the ledger, behind its earlier writes. One that does not read
   * its pre-event state back keeps its row and its remote mode (device sync: op mode 2)
   * and is tried again once its backoff has run out.
   */
  release(id: string): Promise<void> {
    this.releasing.add(id);
    let done!: () => void;
    const p = new Promise<void>((r) => (done = r));
    this.chain(id, async () => {
      let why: string | undefined;
      try {
        const out = await this.deps.ledger().release(id, this.deps.clock.now());
        why = out.verified ? undefined : (out.mismatch ?? "does not read back");
      } catch (e) {
        why = errorMessage(e);
      } finally {
        this.releasing.delete(id);
      }
      this.released(id, why);
      done();
    });
    return p;
  }

  private released(id: string, why: string | undefined): void {
    if (why === undefined) {
      this.deps.stats.releases_ok++;
      this.backoff.clear(id);
      this.deps.setRemote(id, false);
      this.deps.log.info({ device_id: id }, "device put back to its pre-event state");
      return;
    }
    this.deps.stats.releases_failed++;
    const attempt = this.backoff.attempts(id) + 1;
    const retryIn = this.backoff.failed(id, this.deps.clock.now()) - this.deps.clock.now();
    this.deps.setRemote(id, true);
    this.deps.log.warn(
      { device_id: id, err: why, attempt, retry_in_ms: retryIn },
      "device not released: it does not read back its pre-event state; kept in the ledger and retried",
    );
  }

  /** The release tried at once, whatever its backoff (`drivenBy`: the running events that still drive it); what became of it. */
  async releaseNow(id: string, drivenBy: readonly string[]): Promise<string> {
    const ledger = this.deps.ledger();
    const l = ledger.get(id);
    if (!l) return "released: the ledger holds nothing for it";
    if (drivenBy.length && l.unreleased === undefined) return `driven by event ${drivenBy.join(", ")}: released when no event drives it`;
    this.backoff.clear(id);
    await this.release(id);
    const after = ledger.get(id);
    return after ? `not released: ${after.unreleased ?? "still held"}` : "released";
  }

  /**
   * Waits, at most `timeoutMs`, until the devices being put back now (at start: those a
   * crashed run left driven, released by the first plan) are back. A failed put-back is
   * tried again every PUT_BACK_RETRY_MS meanwhile: at start a Zigbee bridge's broker may
   * not be connected yet. After the bound, a device left is retried with its backoff. The
   * count of devices it waited for.
   */
  async putBack(timeoutMs: number): Promise<number> {
    const ids = [...this.releasing];
    if (ids.length === 0) return 0;
    await testHook("ledger-put-back");
    const ledger = this.deps.ledger();
    const deadline = this.deps.clock.mono() + timeoutMs;
    let left = ids;
    for (;;) {
      await this.settle(left, deadline - this.deps.clock.mono());
      left = left.filter((id) => ledger.get(id) !== undefined);
      const wait = Math.min(PUT_BACK_RETRY_MS, deadline - this.deps.clock.mono());
      if (left.length === 0 || wait <= 0 || this.stopping) return ids.length;
      await within(this.deps.clock, new Promise(() => {}), wait);
      for (const id of left) if (!this.stopping && !this.releasing.has(id) && ledger.get(id)) void this.release(id);
    }
  }

  /** Clean stop: every device the ledger holds is put back (bounded by `timeoutMs`). */
  async stop(timeoutMs: number): Promise<void> {
    this.stopping = true;
    await Promise.allSettled([...this.chains.values()]);
    const ledger = this.deps.ledger();
    const ids = ledger.all().map((r) => r.device_id);
    if (ids.length === 0) return;
    await within(this.deps.clock, Promise.allSettled(ids.map((id) => this.release(id))), timeoutMs);
    for (const id of ids) this.deps.setRemote(id, false);
    const left = ledger.all().map((r) => r.device_id);
    if (left.length) this.deps.log.warn({ devices: left }, "devices not put back at stop; the next start releases them");
  }
}
