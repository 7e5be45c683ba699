// A dispatch request over MQTT runs on the simulated site exactly like one over HTTPS:
// the battery follows, one measured execution response goes to the partner, and the
// same response (same Idempotency-Key) is published on the fleet `events` topic, after
// the event's state changes (scheduled, running, done).
import { test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { assertMeasuredDelivery, event, makeRig, rigConfig, siteScenario, waitPaired } from "../support/dispatch.js";
import { startSink } from "../support/partner-sink.js";
import { startGateway } from "../support/gateway.js";
import { withSite } from "../support/site.js";
import { withTmpDir } from "../support/tmp.js";
import { until } from "../support/wait.js";
import { DeliveryLog } from "../../src/delivery/log.js";
import { MQTT } from "../../src/fleet/mqtt-sink.js";
import { command, fleetClient, fleetConfig, record, withBroker } from "../support/mosquitto.js";

test("dr over MQTT: the battery discharges, one execution response to the partner and the same on the events topic, with the state changes", async () => {
  const sink = await startSink();
  try {
    await withSite(siteScenario(), (site) =>
      withTmpDir((dir) =>
        withBroker(dir, async (broker) => {
          const gw = await startGateway(join(dir, "gw"), { ...rigConfig(site, sink), fleet: fleetConfig(broker) });
          const cl = await fleetClient(broker);
          const got = record(cl);
          try {
            await cl.subscribeAsync("sitegate/site-001/events", { qos: 1 });
            await waitPaired(gw, 4);
            const rig = makeRig(site, gw, sink, dir);
            const ev = event({ event_type: "discharge", event_quantity: 3, event_unit: "kW" }, 1500, 4000);
            const r = await command(cl, "site-001", "dr", { mode: "live", event_slots: [ev] });
            assert.deepEqual(r.json, { status: 200, data: [{ event_id: ev.event_id, status: "accepted" }] });
            await until(() => Math.abs((rig.simDevice("battery").power_w as number) - 3000) < 150, "battery discharging at 3 kW");
            const body = await rig.waitResponse(ev.event_id);
            assertMeasuredDelivery(body, 3);
            const isResponse = (x: (typeof got)[number]) =>
              x.props?.userProperties?.kind === "execution_response" && x.json?.event_id === ev.event_id;
            await until(() => got.some(isResponse), "execution response on the events topic");
            const m = got.find(isResponse)!;
            assert.deepEqual(m.json, body, "the same execution response as the HTTPS callback");
            const httpKey = rig.responses().find((x) => x.body.event_id === ev.event_id)!.headers["idempotency-key"];
            assert.equal(m.key, httpKey, "the same Idempotency-Key on both uplinks");
            assert.equal(m.props?.userProperties?.kind, "execution_response");
            // Event state changes on the same topic, in the order they were committed.
            const states = got.filter((x) => x.props?.userProperties?.kind === "event_state" && x.json.event_id === ev.event_id);
            assert.deepEqual(
              states.map((x) => x.json.state),
              ["scheduled", "running", "done"],
            );
            assert.ok(states.every((x) => x.json.source === "partner" && x.json.mode === "live" && typeof x.json.at === "string"));
            // Settled on PUBACK: the fleet outbox is empty again.
            await until(() => new DeliveryLog(gw.daemon.storage).size(MQTT) === 0, "fleet outbox settled");
          } finally {
            await cl.endAsync();
            await gw.stop();
          }
        }),
      ),
    );
  } finally {
    await sink.stop();
  }
});
