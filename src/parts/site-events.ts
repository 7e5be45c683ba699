// The events the parts exchange on the bus. daemon.ts says who emits and who listens.
import type { EventBus } from "../event-bus.js";
import type { InputListener } from "../gpio/lines.js";
import type { Snapshot } from "../telemetry/types.js";

export interface SiteEvents {
  /** A poll cycle's snapshot (poller): the sample store keeps it; the status page and dispatch observe it. */
  snapshot: [snapshot: Snapshot];
  /** A debounced GPIO input changed (gpio): local input events start or end. */
  input: Parameters<InputListener>;
}

export type SiteBus = EventBus<SiteEvents>;
