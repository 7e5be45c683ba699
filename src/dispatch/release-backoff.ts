// When a device that did not read back its release is tried again: 1 s after the first
// failure, doubling to at most 60 s (B4 "Closed loop"), on the executor's clock.
const FIRST_MS = 1000;
const CAP_MS = 60_000;

export class ReleaseBackoff {
  private readonly due = new Map<string, { attempts: number; at: number }>();

  /** A failed attempt at `now`: the next one's time. */
  failed(id: string, now: number): number {
    const attempts = (this.due.get(id)?.attempts ?? 0) + 1;
    const at = now + Math.min(CAP_MS, FIRST_MS * 2 ** Math.min(attempts - 1, 16));
    this.due.set(id, { attempts, at });
    return at;
  }

  /** Whether a release of the device may be tried at `now`. */
  ready(id: string, now: number): boolean {
    const d = this.due.get(id);
    return d === undefined || now >= d.at;
  }

  attempts(id: string): number {
    return this.due.get(id)?.attempts ?? 0;
  }

  clear(id: string): void {
    this.due.delete(id);
  }

  /** The earliest retry of a device not being released right now (Infinity: none waits). */
  next(releasing: ReadonlySet<string>): number {
    let n = Infinity;
    for (const [id, d] of this.due) if (!releasing.has(id)) n = Math.min(n, d.at);
    return n;
  }
}
