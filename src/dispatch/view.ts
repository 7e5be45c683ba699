// An event as people and fleets read it (`sitegate events`, the MQTT `events` command):
// the partner's own field names, ISO times, the state and the execution response, if any.
import type { EventRow } from "./store.js";

export function eventView(r: EventRow) {
  const s = r.spec;
  return {
    event_id: s.event_id,
    source: s.source,
    mode: s.mode,
    event_type: s.event_type,
    event_quantity: s.quantity,
    event_unit: s.unit,
    start_time: new Date(s.start_ms).toISOString(),
    end_time: new Date(s.end_ms).toISOString(),
    priority: s.priority,
    mandatory: s.mandatory,
    state: r.state,
    receipt: r.receipt,
    result: r.result,
  };
}

export type EventView = ReturnType<typeof eventView>;
