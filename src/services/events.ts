// The event list both front ends offer (the MQTT `events` command; `sitegate events` reads
// the same view from the database): the newest events first, as dispatch/view.ts shows them.
import { SitegateError } from "../errors.js";
import type { EventRow } from "../dispatch/store.js";
import { eventView, type EventView } from "../dispatch/view.js";

export const MAX_EVENTS = 1000;

/** `limit` is optional (100); anything but an integer 1..1000 is INVALID_REQUEST. */
export function listEvents(dispatch: { list(limit?: number): EventRow[] }, limit: unknown): { events: EventView[] } {
  if (limit !== undefined && !(Number.isInteger(limit) && (limit as number) >= 1 && (limit as number) <= MAX_EVENTS)) {
    throw new SitegateError("INVALID_REQUEST", `the events command takes an optional limit 1..${MAX_EVENTS}`, {
      details: [{ path: "limit", message: `must be an integer 1..${MAX_EVENTS}` }],
    });
  }
  return { events: dispatch.list((limit as number | undefined) ?? 100).map(eventView) };
}
