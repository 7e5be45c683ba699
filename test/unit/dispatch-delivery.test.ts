// What dispatch hands over reaches every sink whose routing takes it, and only those: the
// partner takes execution responses, the fleet execution responses and event states, and a
// sink added later (here one that lives only in the test) is one more Routes, nothing else.
import { test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { DELIVERY_MIGRATIONS, DeliveryLog, type Routes } from "../../src/delivery/log.js";
import { DispatchDelivery } from "../../src/parts/dispatch-delivery.js";
import { UPLINK_MIGRATIONS, partnerRoutes } from "../../src/uplink/callbacks.js";
import { MQTT, fleetRoutes } from "../../src/fleet/mqtt-sink.js";
import type { EventSpec } from "../../src/dispatch/request.js";
import type { ExecutionResponse } from "../../src/dispatch/result.js";
import { StoragePart } from "../../src/storage/part.js";
import { silentLogger } from "../../src/log.js";
import { withTmpDir } from "../support/tmp.js";

const EXEC_URL = "https://partner.example/v1/execution";
const spec = { event_id: "ev-1", source: "partner", mode: "live", event_type: "shed" } as EventSpec;
const response = { event_id: "ev-1", status: "completed" } as unknown as ExecutionResponse;
/** A sink that lives only in the test: it takes event states, in its own lane. */
const pager: Routes = (kind) => (kind === "event_state" ? { consumer: "pager", lane: "states", address: "page" } : null);

async function withDelivery(sinks: Routes[], fn: (d: DispatchDelivery, log: DeliveryLog) => void): Promise<void> {
  await withTmpDir(async (dir) => {
    const storage = new StoragePart(join(dir, "d"), [DELIVERY_MIGRATIONS, UPLINK_MIGRATIONS], silentLogger());
    storage.start();
    try {
      const log = new DeliveryLog(storage);
      fn(new DispatchDelivery(storage, log, sinks), log);
    } finally {
      storage.stop();
    }
  });
}

const kinds = (log: DeliveryLog, consumer: string) => log.pending(consumer).map((m) => `${m.lane}:${m.kind}:${m.address}`);

test("each sink's routing decides what it gets: partner, fleet and a third sink declared in one place", async () => {
  await withDelivery([partnerRoutes(EXEC_URL), fleetRoutes, pager], (d, log) => {
    d.respond(spec, response);
    d.onState!(spec, "running", Date.UTC(2026, 10, 22, 12));
    assert.deepEqual(kinds(log, "https"), [`execution:execution_response:${EXEC_URL}`]);
    assert.deepEqual(kinds(log, MQTT), ["events:execution_response:events", "events:event_state:events"]);
    assert.deepEqual(kinds(log, "pager"), ["states:event_state:page"]);
    const [exec] = log.pending("https");
    assert.equal(exec!.idempotency_key, log.pending(MQTT)[0]!.idempotency_key, "one message, one key, for every sink");
  });
});

test("a kind no sink takes is not written (no fleet: event states stay out of the log)", async () => {
  await withDelivery([partnerRoutes(EXEC_URL)], (d, log) => {
    d.onState!(spec, "running", Date.UTC(2026, 10, 22, 12));
    assert.equal(log.size("https") + log.size(MQTT), 0);
    d.respond(spec, response);
    assert.equal(log.size("https"), 1);
    assert.equal(log.size(MQTT), 0);
  });
});
