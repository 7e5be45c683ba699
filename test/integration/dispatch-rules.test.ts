// Dispatch rules against the simulator over HTTPS: sharing between batteries, a battery
// that runs empty, a dead inverter, devices that reject or ignore writes, cancellation,
// 409 after start, overlapping events stacking, idempotent repeats, test mode, bad input.
import { test } from "node:test";
import assert from "node:assert/strict";
import { event, executionResponses, withDispatchRig, type DispatchRig } from "../support/dispatch.js";
import { until } from "../support/wait.js";
import type { Dispatcher } from "../../src/dispatch/dispatcher.js";

const writes = (rig: DispatchRig, name: string) => (rig.simDevice(name).writes as unknown[]).length;
const devOf = (body: any, id: string) => body.details.devices.find((d: any) => d.device_id === id);
const count = (rig: DispatchRig, sql: string) => (rig.gw.daemon.storage.db.prepare(sql).get() as { n: number }).n;
/** Devices the ledger still holds (a release is complete once its row is gone). */
const ledgerRows = (rig: DispatchRig) => count(rig, "SELECT COUNT(*) AS n FROM dp_ledger");
const outboxRows = (rig: DispatchRig) => executionResponses(rig).length;

test("two batteries share in proportion to max power; one that runs empty makes the result partial", async () => {
  await withDispatchRig(
    {
      batteries: [
        { name: "big", max_power_w: 5000 },
        { name: "small", max_power_w: 3000, capacity_wh: 4, soc_pct: 50 },
      ],
    },
    async (rig) => {
      const ev = event({ event_type: "discharge", event_quantity: 7, event_unit: "kW" }, 1200, 9000);
      assert.equal((await rig.dr({ mode: "live", event_slots: [ev] })).status, 200);
      await until(
        () => Math.abs(rig.simDevice("big").power_w - 4375) < 100 && Math.abs(rig.simDevice("small").power_w - 2625) < 100,
        "4375 W + 2625 W",
      );
      // small holds 2 Wh: empty after under 3 s at 2625 W; big then runs at its maximum.
      await until(() => rig.simDevice("small").soc_pct <= 0.5, "small battery empty", 20_000);
      await until(() => Math.abs(rig.simDevice("big").power_w - 5000) < 100, "big takes what it can of the empty one's share");
      const body = await rig.waitResponse(ev.event_id);
      assert.equal(devOf(body, "big").requested_w, 5000, JSON.stringify(body));
      assert.match(devOf(body, "small").error ?? "", /empty/);
      assert.equal(body.status, "partial", JSON.stringify(body));
    },
  );
});

test("a battery that runs empty mid-event with nobody to take over gives partial", async () => {
  await withDispatchRig({ batteries: [{ name: "battery", max_power_w: 3600, capacity_wh: 5, soc_pct: 50 }] }, async (rig) => {
    // 2.5 Wh at 3600 W: empty after 2.5 s of a 6 s event.
    const ev = event({ event_type: "discharge", event_quantity: 3600, event_unit: "w" }, 1000, 6000);
    assert.equal((await rig.dr({ mode: "live", event_slots: [ev] })).status, 200);
    const body = await rig.waitResponse(ev.event_id);
    assert.equal(body.status, "partial", JSON.stringify(body));
    const d = devOf(body, "battery");
    assert.ok(d.delivered_w > 200 && d.delivered_w < 3400, `delivered ${d.delivered_w}`);
  });
});

test("a dead inverter gives partial with device-level detail; the other takes what it can", async () => {
  await withDispatchRig(
    {
      batteries: [
        { name: "b1", max_power_w: 5000 },
        { name: "b2", max_power_w: 3000 },
      ],
    },
    async (rig) => {
      rig.site.setFault({ device: "b2", fault: "no_answer" });
      await until(
        async () => {
          const s = await rig.gw.call("GET", "/healthz");
          return s.json.devices.detail.find((d: any) => d.device_id === "b2")?.online === false;
        },
        "b2 offline",
        20_000,
      );
      const ev = event({ event_type: "discharge", event_quantity: 7, event_unit: "kW" }, 1000, 8000);
      assert.equal((await rig.dr({ mode: "live", event_slots: [ev] })).status, 200);
      const body = await rig.waitResponse(ev.event_id);
      assert.equal(body.status, "partial", JSON.stringify(body));
      assert.equal(devOf(body, "b2").status, "skipped");
      assert.equal(devOf(body, "b2").error, "offline");
      assert.equal(devOf(body, "b1").requested_w, 5000);
      assert.ok(Math.abs(body.details.delivered_quantity - 5) < 0.3, JSON.stringify(body.details));
    },
  );
});

for (const fault of ["exception", "ignore_writes"] as const) {
  test(`a battery that ${fault === "exception" ? "rejects" : "ignores"} writes is a per-device error and never counted as delivered`, async () => {
    await withDispatchRig({}, async (rig) => {
      rig.site.setFault({ device: "battery", fault, ...(fault === "exception" ? { code: 4 } : {}) });
      // A device that answers every request with an exception goes offline before the event.
      if (fault === "exception") {
        await until(
          async () =>
            (await rig.gw.call("GET", "/healthz")).json.devices.detail.find((d: any) => d.device_id === "battery")?.online === false,
          "battery offline",
          20_000,
        );
      }
      const ev = event({ event_type: "discharge", event_quantity: 2, event_unit: "kW" }, 800, 3000);
      assert.equal((await rig.dr({ mode: "live", event_slots: [ev] })).status, 200);
      const body = await rig.waitResponse(ev.event_id);
      assert.equal(body.status, "failed", JSON.stringify(body));
      const d = devOf(body, "battery");
      assert.ok(d, JSON.stringify(body));
      assert.equal(d.status, fault === "exception" ? "skipped" : "failed", JSON.stringify(d));
      assert.ok(d.delivered_w < 100);
      assert.ok(d.error, "the device entry says what went wrong");
      assert.equal(rig.simDevice("battery").power_w, 0);
    });
  });
}

test("a relay that acknowledges the shed but does not switch is failed with 0 W, never credited with its rating (issue 39 finding 3)", async () => {
  await withDispatchRig({ meter: false, relay: { rated_power_w: 2000 } }, async (rig) => {
    rig.site.setFault({ device: "relay", fault: "ignore_writes" });
    const ev = event({ event_type: "shed", event_quantity: 1, event_unit: "kW" }, 800, 3000);
    assert.equal((await rig.dr({ mode: "live", event_slots: [ev] })).status, 200);
    const body = await rig.waitResponse(ev.event_id);
    assert.deepEqual(rig.simDevice("relay").coils, [true, true, true, true], "the relay never switched");
    const d = devOf(body, "relay");
    assert.equal(d?.status, "failed", JSON.stringify(body));
    assert.equal(d.delivered_w, 0, JSON.stringify(body));
    assert.match(d.error ?? "", /did not take effect/);
    assert.equal(body.details.delivered_quantity, 0, JSON.stringify(body));
    assert.equal(body.status, "failed", JSON.stringify(body));
  });
});

test("cancellation stops a running event, a change after start is 409, overlapping events stack on one battery", async () => {
  await withDispatchRig({}, async (rig) => {
    const low = event({ event_type: "discharge", event_quantity: 1, event_unit: "kW", priority: 60 }, 800, 30_000);
    const high = event({ event_type: "discharge", event_quantity: 3, event_unit: "kW", priority: 2 }, 800, 30_000);
    assert.equal((await rig.dr({ mode: "live", event_slots: [low, high] })).status, 200);
    await until(
      () => Math.abs(rig.simDevice("battery").power_w - 4000) < 100,
      "3 kW of the priority-2 event plus 1 kW of the priority-60 one",
    );
    const changed = await rig.dr({ mode: "live", event_slots: [{ ...high, event_quantity: 4 }] });
    assert.equal(changed.status, 409);
    assert.equal(changed.json.error, "conflict");
    assert.equal(changed.json.details[0].path, "event_slots[0]");
    const c = await rig.dr({ mode: "live", event_slots: [{ ...high, cancelled: true }] });
    assert.equal(c.status, 200);
    assert.deepEqual(c.json, [{ event_id: high.event_id, status: "cancelled" }]);
    const body = await rig.waitResponse(high.event_id, 5000);
    assert.equal(body.details.cancelled, true);
    await until(() => Math.abs(rig.simDevice("battery").power_w - 1000) < 100, "the priority-60 event alone");
    const c2 = await rig.dr({ mode: "live", event_slots: [{ ...low, cancelled: true }] });
    assert.equal(c2.status, 200);
    await until(() => rig.simDevice("battery").power_w === 0, "stopped");
    const events = await rig.gw.call("GET", "/metrics");
    assert.match(events.text, /sitegate_dispatch_events\{state="running"\} 0/);
  });
});

test("a repeated request never writes twice; test mode writes nothing", async () => {
  await withDispatchRig({}, async (rig) => {
    const ev = event({ event_type: "discharge", event_quantity: 2, event_unit: "kW" }, 1000, 2500);
    const body = { mode: "live", event_slots: [ev] };
    const a = await rig.dr(body);
    const b = await rig.dr(body);
    assert.deepEqual(b.json, a.json);
    await until(() => rig.simDevice("battery").power_w > 0, "running");
    assert.deepEqual((await rig.dr(body)).json, a.json, "an identical repeat while running is the same receipt");
    await rig.waitResponse(ev.event_id);
    await until(() => ledgerRows(rig) === 0, "released from the ledger");
    // One discharge action (3 registers) and its write-back (3 registers): nothing twice.
    assert.equal(writes(rig, "battery"), 6);
    assert.deepEqual((await rig.dr(body)).json, a.json, "an identical repeat after the end is the same receipt");
    assert.equal(outboxRows(rig), 0, "no second execution response queued");
    assert.equal(rig.responses().filter((r) => r.body.event_id === ev.event_id).length, 1);

    const before = Object.fromEntries(["battery", "pv", "relay", "grid"].map((n) => [n, writes(rig, n)]));
    const t1 = event({ event_type: "discharge", event_quantity: 2, event_unit: "kW" }, 800, 2000);
    const t2 = event({ event_type: "shed", event_quantity: 1, event_unit: "kW" }, 800, 2000);
    assert.equal((await rig.dr({ mode: "test", event_slots: [t1, t2] })).status, 200);
    const r1 = await rig.waitResponse(t1.event_id);
    const r2 = await rig.waitResponse(t2.event_id);
    assert.equal(r1.details.mode, "test");
    assert.equal(r1.details.measured, false);
    assert.equal(r1.details.delivered_quantity, 2);
    assert.equal(r2.details.mode, "test");
    const after = Object.fromEntries(["battery", "pv", "relay", "grid"].map((n) => [n, writes(rig, n)]));
    assert.deepEqual(after, before, "test mode made no register write");
  });
});

test("bad requests get 400 with a path per problem and store nothing", async () => {
  await withDispatchRig({}, async (rig) => {
    const good = event();
    const r = await rig.dr({
      mode: "live",
      event_slots: [good, { ...event(), priority: 0, event_unit: "GW" }, { ...event(), event_id: good.event_id }],
    });
    assert.equal(r.status, 400);
    assert.equal(r.json.error, "invalid_request");
    const paths = r.json.details.map((d: any) => d.path);
    assert.ok(paths.includes("event_slots[1].priority"), paths.join());
    assert.ok(paths.includes("event_slots[1].event_unit"));
    assert.ok(paths.includes("event_slots[2].event_id"));
    const past = await rig.dr({ mode: "live", event_slots: [event({}, -10_000, 5000)] });
    assert.equal(past.status, 400);
    assert.equal(past.json.details[0].path, "event_slots[0].end_time");
    const offset = await rig.dr({ mode: "live", event_slots: [{ ...event(), start_time: "2030-01-01T10:00:00+01:00" }] });
    assert.equal(offset.status, 400);
    const text = await rig.gw.call("POST", "/v1/api/gateway/site-001/dr", {
      raw: "mode=live",
      headers: { ...rig.gw.apiKeyHeaders, "content-type": "text/plain" },
    });
    assert.equal(text.status, 415);
    const noKey = await rig.gw.call("POST", "/v1/api/gateway/site-001/dr", { body: { mode: "live", event_slots: [event()] } });
    assert.equal(noKey.status, 401);
    const many = await rig.dr({ mode: "live", event_slots: Array.from({ length: 101 }, () => event()) });
    assert.equal(many.status, 400);
    // The good event of the rejected request was not stored.
    const dispatch = rig.gw.daemon.part<Dispatcher>("dispatch");
    assert.equal(
      dispatch.list().some((e) => e.spec.event_id === good.event_id),
      false,
    );
    assert.equal(dispatch.scheduled() + dispatch.running(), 0);
    assert.equal(writes(rig, "battery"), 0);
  });
});
