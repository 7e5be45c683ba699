// What dispatch hands over for delivery: each execution response appended once to the
// delivery log for the partner (https) and the fleet (mqtt), and each event state for the
// fleet, all inside the dispatcher's transaction (a failure here rolls it back, so these are calls, not bus
// events). Idempotency-Keys are derived from the database's instance id and the event,
// so a message queued again after a crash keeps its key.
import type { Config } from "../config/schema.js";
import type { DispatcherDeps } from "../dispatch/dispatcher.js";
import type { DeliveryLog } from "../delivery/log.js";
import { mqttRoute } from "../fleet/mqtt-sink.js";
import type { StoragePart } from "../storage/part.js";
import { nameKey } from "../util/idempotency.js";
import { httpsRoute, instanceId, messageOf } from "../uplink/callbacks.js";

export class DispatchDelivery {
  private ns = "";

  constructor(
    private readonly config: Config,
    private readonly storage: StoragePart,
    private readonly messages: DeliveryLog,
    /** A fleet is configured: its consumer gets the messages too. */
    private readonly fleet: boolean,
  ) {}

  /** The database's instance id, namespace of every derived key (read once, after storage starts). */
  readonly instance = (): string => (this.ns ||= instanceId(this.storage.db));

  readonly respond: DispatcherDeps["respond"] = (spec, body) => {
    const idempotencyKey = nameKey(this.instance(), `execution:${spec.event_id}`);
    const routes = [httpsRoute("execution_response", this.config.partner.execution_url), ...(this.fleet ? [mqttRoute()] : [])];
    this.messages.append(messageOf("execution_response", body, idempotencyKey), routes);
  };

  readonly onState: NonNullable<DispatcherDeps["onState"]> = (spec, state, at) => {
    if (!this.fleet) return;
    const body = {
      event_id: spec.event_id,
      source: spec.source,
      mode: spec.mode,
      event_type: spec.event_type,
      state,
      at: new Date(at).toISOString(),
    };
    this.messages.append(messageOf("event_state", body, nameKey(this.instance(), `event_state:${spec.event_id}:${state}:${at}`)), [
      mqttRoute(),
    ]);
  };
}
