// What dispatch hands over for delivery: each execution response into the partner's
// outbox and the fleet's, and each event state into the fleet's, all inside the
// dispatcher's transaction (a failure here rolls it back, so these are calls, not bus
// events). Idempotency-Keys are derived from the database's instance id and the event,
// so a message queued again after a crash keeps its key.
import type { Config } from "../config/schema.js";
import type { DispatcherDeps } from "../dispatch/dispatcher.js";
import type { FleetQueue } from "../fleet/queue.js";
import type { StoragePart } from "../storage/part.js";
import { nameKey } from "../util/idempotency.js";
import { instanceId } from "../uplink/outbox.js";
import type { Uplink } from "../uplink/uplink.js";

export class DispatchDelivery {
  private ns = "";

  constructor(
    private readonly config: Config,
    private readonly storage: StoragePart,
    private readonly uplink: Uplink,
    private readonly fleet: FleetQueue | null,
  ) {}

  /** The database's instance id, namespace of every derived key (read once, after storage starts). */
  readonly instance = (): string => (this.ns ||= instanceId(this.storage.db));

  readonly respond: DispatcherDeps["respond"] = (spec, body) => {
    const idempotencyKey = nameKey(this.instance(), `execution:${spec.event_id}`);
    this.uplink.enqueue("execution_response", this.config.partner.execution_url, body, { idempotencyKey });
    this.fleet?.enqueue("events", "execution_response", body, idempotencyKey);
  };

  readonly onState: NonNullable<DispatcherDeps["onState"]> = (spec, state, at) => {
    if (!this.fleet) return;
    const body = { event_id: spec.event_id, source: spec.source, mode: spec.mode, event_type: spec.event_type, state, at: new Date(at).toISOString() };
    this.fleet.enqueue("events", "event_state", body, nameKey(this.instance(), `event_state:${spec.event_id}:${state}:${at}`));
  };
}
