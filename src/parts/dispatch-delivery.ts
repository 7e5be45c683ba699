// What dispatch hands over for delivery: each execution response and each event state
// appended once to the delivery log, for every sink whose routing takes that kind (the
// partner takes execution responses, the fleet both), all inside the dispatcher's
// transaction (a failure here rolls it back, so these are calls, not bus events).
// Idempotency-Keys are derived from the database's instance id and the event, so a
// message queued again after a crash keeps its key.
import type { DispatcherDeps } from "../dispatch/dispatcher.js";
import type { DeliveryLog, Route, Routes } from "../delivery/log.js";
import type { StoragePart } from "../storage/part.js";
import { nameKey } from "../util/idempotency.js";
import { instanceId, messageOf } from "../uplink/callbacks.js";

export class DispatchDelivery {
  private ns = "";

  constructor(
    private readonly storage: StoragePart,
    private readonly deliveryLog: DeliveryLog,
    /** Each sink's routing (uplink/callbacks.ts partnerRoutes, fleet/mqtt-sink.ts fleetRoutes). */
    private readonly sinks: readonly Routes[],
  ) {}

  /** The database's instance id, namespace of every derived key (read once, after storage starts). */
  readonly instance = (): string => (this.ns ||= instanceId(this.storage.db));

  readonly respond: DispatcherDeps["respond"] = (spec, body) => {
    this.append("execution_response", body, `execution:${spec.event_id}`);
  };

  readonly onState: NonNullable<DispatcherDeps["onState"]> = (spec, state, at) => {
    if (this.routes("event_state").length === 0) return; // no sink takes event states (no fleet): no body, no key per event
    const body = {
      event_id: spec.event_id,
      source: spec.source,
      mode: spec.mode,
      event_type: spec.event_type,
      state,
      at: new Date(at).toISOString(),
    };
    this.append("event_state", body, `event_state:${spec.event_id}:${state}:${at}`);
  };

  /** Where each sink takes messages of `kind` (a sink's routing is fixed per kind: asked once). */
  private readonly byKind = new Map<string, Route[]>();
  private routes(kind: string): Route[] {
    let routes = this.byKind.get(kind);
    if (!routes) this.byKind.set(kind, (routes = this.sinks.map((r) => r(kind)).filter((r): r is Route => r !== null)));
    return routes;
  }

  /** A message of `kind` for every sink that takes it (none: nothing is written). */
  private append(kind: string, body: unknown, keyName: string): void {
    const routes = this.routes(kind);
    if (routes.length) this.deliveryLog.append(messageOf(kind, body, nameKey(this.instance(), keyName)), routes);
  }
}
