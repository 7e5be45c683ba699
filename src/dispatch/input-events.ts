// Local events driven by GPIO inputs (`on_active`): while an input is active, one event
// of its source `input:<device_id>` runs (pv_limit at priority 0 unless set); it starts
// as soon as the input is seen active and is cancelled, its devices put back, when the
// input is released. At start, an event left running from before a restart is kept when
// the input is still active and ended when it is not. An input active for longer than an
// event's horizon gets its next event within a minute of the last one's end.
import type { Part } from "../lifecycle.js";
import type { Logger } from "../log.js";
import { nameKey } from "../util/idempotency.js";
import type { EventSpec } from "./request.js";

/** How far ahead an input's event is scheduled to end; the release ends it. */
const OPEN_END_MS = 7 * 86_400_000;

export interface InputTrigger {
  device_id: string;
  on_active?: { event_type: "pv_limit"; limit_pct: number; priority?: number };
}

export interface LocalDispatch {
  submitLocal(spec: EventSpec): boolean;
  endLocal(source: string, reason: string): number;
  hasOpen(source: string): boolean;
}

export function inputEvent(t: InputTrigger, now: number): EventSpec {
  const a = t.on_active!;
  return {
    event_id: nameKey("sitegate-input", `${t.device_id}@${new Date(now).toISOString()}`),
    source: `input:${t.device_id}`,
    mode: "live",
    event_type: a.event_type,
    quantity: 0,
    unit: "w",
    quantity_w: 0,
    start_ms: now,
    end_ms: now + OPEN_END_MS,
    priority: a.priority ?? 0,
    mandatory: true,
    cancelled: false,
    limit_pct: a.limit_pct,
  };
}

export class InputEvents implements Part {
  readonly name = "input-events";
  private started = false;
  private readonly pending = new Map<string, { t: InputTrigger; active: boolean }>();
  /** The last state of every input, applied again every minute. */
  private readonly last = new Map<string, { t: InputTrigger; active: boolean }>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly dispatch: LocalDispatch,
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
  ) {}

  /** An input's debounced state: heard before start, it is applied at start. */
  changed(t: InputTrigger, active: boolean): void {
    if (!t.on_active) return;
    this.last.set(t.device_id, { t, active });
    if (!this.started) {
      this.pending.set(t.device_id, { t, active });
      return;
    }
    const source = `input:${t.device_id}`;
    try {
      if (active) {
        if (this.dispatch.hasOpen(source)) return;
        const spec = inputEvent(t, this.now());
        if (this.dispatch.submitLocal(spec))
          this.log.info(
            { device_id: t.device_id, event_id: spec.event_id, event_type: spec.event_type, limit_pct: spec.limit_pct },
            "input active: local event started",
          );
      } else if (this.dispatch.endLocal(source, `input ${t.device_id} released`) > 0) {
        this.log.info({ device_id: t.device_id }, "input released: local event ended");
      }
    } catch (e) {
      this.log.error({ device_id: t.device_id, err: (e as Error).message }, "cannot apply an input's local event");
    }
  }

  start(): void {
    this.started = true;
    for (const { t, active } of this.pending.values()) this.changed(t, active);
    this.pending.clear();
    this.timer = setInterval(() => {
      for (const { t, active } of this.last.values()) if (active) this.changed(t, true);
    }, 60_000);
    this.timer.unref();
  }

  stop(): void {
    this.started = false;
    clearInterval(this.timer);
  }
}
