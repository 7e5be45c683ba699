// Parts with start/stop, started in dependency order and stopped in reverse.
// Constructors do nothing that can fail; start() does. A failing stop() is logged
// and does not keep the other parts from stopping.
import type { Logger } from "./log.js";

export interface Part {
  readonly name: string;
  start(): Promise<void> | void;
  stop(): Promise<void> | void;
}

export class Lifecycle {
  private readonly parts: Part[] = [];
  private started: Part[] = [];
  private stopping: Promise<void> | null = null;

  constructor(private readonly log: Logger) {}

  add<T extends Part>(part: T): T {
    this.parts.push(part);
    return part;
  }

  /** Starts every part in order; if one fails, the ones already started are stopped and the error rethrown. */
  async start(): Promise<void> {
    for (const part of this.parts) {
      try {
        await part.start();
      } catch (e) {
        this.log.error({ part: part.name, err: e }, "part failed to start");
        await this.stop();
        throw e;
      }
      this.started.push(part);
      this.log.debug({ part: part.name }, "started");
    }
  }

  /** Stops started parts in reverse order, each within `timeoutMs`; safe to call twice. */
  stop(timeoutMs = 4000): Promise<void> {
    this.stopping ??= (async () => {
      const parts = this.started.reverse();
      this.started = [];
      for (const part of parts) {
        let timer: NodeJS.Timeout | undefined;
        try {
          await Promise.race([
            Promise.resolve().then(() => part.stop()),
            new Promise((_, reject) => {
              timer = setTimeout(() => reject(new Error(`stop timed out after ${timeoutMs} ms`)), timeoutMs);
            }),
          ]);
          this.log.debug({ part: part.name }, "stopped");
        } catch (e) {
          this.log.error({ part: part.name, err: e }, "part failed to stop cleanly");
        } finally {
          clearTimeout(timer);
        }
      }
    })();
    return this.stopping;
  }
}
