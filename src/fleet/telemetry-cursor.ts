// The fleet's cursor on the sample store: telemetry is read from the store (written once)
// as a consumer of its own, so HTTPS and MQTT progress independently and the store keeps
// rows until both have them.
import type { StoragePart } from "../storage/part.js";
import type { SampleStore, TelemetryCursor } from "../telemetry/sample-store.js";

/**
 * The fleet's consumer of the sample store; registered with the composition, before any row
 * could go. Where the store has no cursor of it yet, it starts at fl_state's telemetry_cursor.
 */
export function telemetryConsumer(samples: SampleStore, storage: StoragePart): TelemetryCursor {
  const initial = () => storage.db.prepare("SELECT value FROM fl_state WHERE key = 'telemetry_cursor'").pluck().get() as number;
  return samples.consumer("fleet_telemetry", { initial });
}
