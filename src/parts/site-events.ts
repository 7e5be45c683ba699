// The events the parts exchange on the bus. daemon.ts says who emits and who listens; a
// part below the composition root emits through the one function it is given
// (`events.emitter(name)`), so every listener is wrapped the same way.
import type { EventBus } from "../event-bus.js";
import type { Route } from "../delivery/log.js";
import type { InputTrigger } from "../dispatch/input-events.js";
import type { Snapshot } from "../telemetry/types.js";

export interface SiteEvents {
  /** A tick's snapshot (the site clock, part "poller"): the sample store keeps it; the status page and dispatch observe it. */
  snapshot: [snapshot: Snapshot];
  /** The sample store took a snapshot its readers may read now: the data push and the fleet's telemetry send it. */
  samples_appended: [];
  /** A message was appended to the delivery log: the consumers its routes name wake their lanes. */
  messages_appended: [routes: readonly Route[]];
  /** A device was paired, configured or replaced (registry): the fleet's device view follows (the Modbus polling follows the registry's version). */
  devices_changed: [];
  /** A debounced GPIO input changed (gpio): its line's device_id and on_active, and whether it is active now; local input events start or end. */
  input: [input: InputTrigger, active: boolean];
}

export type SiteBus = EventBus<SiteEvents>;
