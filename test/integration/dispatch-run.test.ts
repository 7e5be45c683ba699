// Dispatch against the simulated site: the battery and the grid meter follow the
// requested power, shed opens relays (PV only for what the loads leave), restore ends a
// running shed and puts back what it changed, events stack on shared batteries, and
// each event gets one measured execution response.
import { test } from "node:test";
import assert from "node:assert/strict";
import { assertMeasuredDelivery, event, executionResponses, withDispatchRig, type DispatchRig } from "../support/dispatch.js";
import { until } from "../support/wait.js";
import { setTimeout as sleep } from "node:timers/promises";
import type { Dispatcher } from "../../src/dispatch/dispatcher.js";

test("discharge moves the battery and the grid meter by about the requested power; one measured execution response", async () => {
  await withDispatchRig({}, async (rig) => {
    const gridBefore = rig.simDevice("grid").power_w as number;
    const ev = event({ event_type: "discharge", event_quantity: 3, event_unit: "kW" }, 1500, 4000);
    const r = await rig.dr({ mode: "live", event_slots: [ev] });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.deepEqual(r.json, [{ event_id: ev.event_id, status: "accepted" }]);
    await until(() => Math.abs((rig.simDevice("battery").power_w as number) - 3000) < 150, "battery discharging at 3 kW");
    assert.ok(Math.abs(gridBefore - (rig.simDevice("grid").power_w as number) - 3000) < 300, "grid import drops by about 3 kW");
    // The SunSpec battery's power (with its scale factor) read back in the control lane after the write.
    const dispatch = rig.gw.daemon.part<Dispatcher>("dispatch");
    await until(() => dispatch.stats.confirms_ok >= 1, "confirmation read after the setpoint write");
    assert.equal(dispatch.stats.confirms_failed, 0);
    const sync = await rig.gw.call("GET", "/v1/api/gateway/site-001/devicesync", { headers: rig.gw.apiKeyHeaders });
    await until(async () => {
      const s = await rig.gw.call("GET", "/v1/api/gateway/site-001/devicesync", { headers: rig.gw.apiKeyHeaders });
      return s.json.devices.find((d: any) => d.device_id === "battery").device_op_mode === 2;
    }, "device sync shows op mode 2");
    assert.equal(sync.status, 200);
    const body = await rig.waitResponse(ev.event_id);
    assertMeasuredDelivery(body, 3);
    assert.equal(body.details.mode, "live");
    assert.equal(body.details.unit, "kW");
    const dev = body.details.devices.find((d: any) => d.device_id === "battery");
    assert.equal(dev.requested_w, 3000);
    // Released at the end: back to idle.
    await until(() => rig.simDevice("battery").power_w === 0, "battery released");
    await until(() => executionResponses(rig).length === 0, "outbox settled");
    assert.equal(
      rig.sink.requests.filter((x) => x.path === "/exec" && (x.body as any).event_id === ev.event_id).length,
      1,
      "one response, sent once",
    );
  });
});

test("charge makes the battery absorb the requested power and the grid import rise; a partner that is down gets the response later", async () => {
  await withDispatchRig({}, async (rig) => {
    const gridBefore = rig.simDevice("grid").power_w as number;
    const ev = event({ event_type: "charge", event_quantity: 2000, event_unit: "w" }, 1000, 6000);
    assert.equal((await rig.dr({ mode: "live", event_slots: [ev] })).status, 200);
    await rig.sink.refuse();
    await until(() => Math.abs((rig.simDevice("battery").power_w as number) + 2000) < 150, "battery charging at 2 kW");
    assert.ok(Math.abs((rig.simDevice("grid").power_w as number) - gridBefore - 2000) < 300, "grid import rises by about 2 kW");
    const dispatcher = rig.gw.daemon.part<Dispatcher>("dispatch");
    await until(
      () => dispatcher.list().some((e) => e.spec.event_id === ev.event_id && e.state === "done"),
      "event done while the partner is down",
    );
    // Committed with the end of the event: exactly one execution response waits in the outbox.
    const queued = executionResponses(rig);
    assert.equal(queued.length, 1, JSON.stringify(queued));
    assert.equal(JSON.parse(queued[0].body).event_id, ev.event_id);
    const attempts = () => executionResponses(rig)[0]?.attempts ?? 0;
    await until(() => attempts() > 0, "a refused attempt");
    assert.equal(rig.responses().length, 0);
    await rig.sink.accept();
    const body = await rig.waitResponse(ev.event_id);
    assertMeasuredDelivery(body, 2000);
  });
});

test("shed opens the relay (PV untouched when the loads cover the quantity), completed; a restore at the same priority ends a second shed and the coils read back their pre-shed states", async () => {
  await withDispatchRig({ irradiance: 0.5 }, async (rig) => {
    assert.equal(
      rig.simDevice("relay").coils.every((c: boolean) => c),
      true,
    );
    const pvBefore = rig.simDevice("pv").power_w as number;
    assert.ok(pvBefore > 2500, `pv produces (${pvBefore} W)`);
    // 4 x 400 W on the relay cover 1.2 kW: the grid meter sees it, PV is never curtailed.
    const shed = event({ event_type: "shed", event_quantity: 1.2, event_unit: "kW", priority: 20 }, 1500, 8000);
    assert.equal((await rig.dr({ mode: "live", event_slots: [shed] })).status, 200);
    await until(() => rig.simDevice("relay").coils.every((c: boolean) => !c), "relay coils open");
    const body = await rig.waitResponse(shed.event_id);
    assert.equal(body.status, "completed", JSON.stringify(body));
    assert.equal(body.details.measured, true);
    assert.ok(body.details.coverage > 0.8, JSON.stringify(body.details));
    assert.deepEqual(
      body.details.devices.map((d: any) => d.device_id),
      ["relay"],
      "PV is not curtailed on top of the loads",
    );
    assert.equal(rig.simDevice("pv").setpoint_w, undefined, "no limit written to PV");
    await until(() => rig.simDevice("relay").coils.every((c: boolean) => c), "relay closed again at the end");
    // Released once the relay reads its coils back (the ledger row goes then): a coil switched by hand
    // between the write-back and its read-back would be a release that did not read back, retried.
    await until(
      () => (rig.gw.daemon.storage.db.prepare("SELECT COUNT(*) AS n FROM dp_ledger").get() as { n: number }).n === 0,
      "the release read back",
    );

    // A coil that is off before the next shed stays off after the restore.
    rig.site.device("relay").set({ coils: [true, true, true, false] });
    // (The 60 s baseline still holds part of the first shed, so this one may curtail PV too.)
    const shed2 = event({ event_type: "shed", event_quantity: 0.5, event_unit: "kW", priority: 50 }, 800, 60_000);
    assert.equal((await rig.dr({ mode: "live", event_slots: [shed2] })).status, 200);
    await until(() => rig.simDevice("relay").coils.every((c: boolean) => !c), "relay open for the second shed");
    const restore = event({ event_type: "restore", event_quantity: 1, event_unit: "kW", priority: 50 }, 500, 3000);
    assert.equal((await rig.dr({ mode: "live", event_slots: [restore] })).status, 200);
    const sb = await rig.waitResponse(shed2.event_id);
    assert.match(sb.details.ended_by, /^ended by restore /, JSON.stringify(sb));
    assert.deepEqual(rig.simDevice("relay").coils, [true, true, true, false], "pre-shed states, the fourth coil still off");
    const rb = await rig.waitResponse(restore.event_id);
    assert.equal(rb.status, "completed", JSON.stringify(rb));
    const shedDevices = sb.details.devices.map((d: any) => d.device_id);
    assert.ok(shedDevices.includes("relay"), JSON.stringify(sb));
    assert.deepEqual(
      rb.details.devices.map((d: any) => [d.device_id, d.status]),
      shedDevices.map((id: string) => [id, "completed"]),
      "exactly what the shed changed, each read back",
    );
    assert.equal(rig.simDevice("pv").setpoint_w, undefined, "no PV limit left");
    assert.deepEqual(rig.simDevice("relay").coils, [true, true, true, false]);
  });
});

test("a relay-only site with rated loads reports a 1 kW shed completed with measured: false", async () => {
  await withDispatchRig({ meter: false, pv: false, relay: { rated_power_w: [400, 400, 400, 400] } }, async (rig) => {
    const shed = event({ event_type: "shed", event_quantity: 1, event_unit: "kW", priority: 20 }, 1000, 6000);
    assert.equal((await rig.dr({ mode: "live", event_slots: [shed] })).status, 200);
    await until(() => rig.simDevice("relay").coils.every((c: boolean) => !c), "relay coils open");
    const body = await rig.waitResponse(shed.event_id);
    assert.equal(body.status, "completed", JSON.stringify(body));
    assert.equal(body.details.measured, false);
    const dev = body.details.devices.find((d: any) => d.device_id === "relay");
    assert.equal(dev.status, "completed");
    await until(() => rig.simDevice("relay").coils.every((c: boolean) => c), "relay closed at the end");
  });
});

test("a discharge running beside a shed is not counted as shed delivery", async () => {
  await withDispatchRig({ irradiance: 0 }, async (rig) => {
    // 1 kW of loads asked for, the relay carries 1.6 kW; a 3 kW discharge runs all along.
    const dis = event({ event_type: "discharge", event_quantity: 3, event_unit: "kW", priority: 10 }, 1500, 9000);
    const shed = event({ event_type: "shed", event_quantity: 4, event_unit: "kW", priority: 20 }, 1500, 9000);
    assert.equal((await rig.dr({ mode: "live", event_slots: [dis, shed] })).status, 200);
    const sb = await rig.waitResponse(shed.event_id);
    const db = await rig.waitResponse(dis.event_id);
    assertMeasuredDelivery(db, 3);
    // Grid import fell by about 4.6 kW; only the relay's 1.6 kW is the shed's.
    assert.equal(sb.status, "partial", JSON.stringify(sb));
    assert.ok(Math.abs(sb.details.delivered_quantity - 1.6) < 0.3, JSON.stringify(sb.details));
  });
});

/**
 * The simulator's ground truth over an event's window: the site's grid import sampled
 * every 100 ms (the simulator's own site model, with or without a meter device), as the
 * drop against its value just before the start. Resolves once the window is over.
 */
async function groundTruth(rig: DispatchRig, ev: { start_time: string; end_time: string }) {
  const grid = () => rig.site.state().site.grid_w as number;
  const before = grid();
  const [from, to] = [Date.parse(ev.start_time), Date.parse(ev.end_time)];
  const samples: number[] = [];
  // Sampling, not waiting for a condition: the truth is the mean over the whole window.
  while (Date.now() < to) {
    if (Date.now() >= from) samples.push(grid());
    await sleep(100); // wait: the sampling interval of the mean over the window, not a wait for a condition
  }
  return { before, max: Math.max(...samples), drop: before - samples.reduce((a, b) => a + b, 0) / samples.length };
}

/** B4: the reported delivery within 10 % or 0.2 kW of the simulator's truth. */
function assertTruth(body: any, truthW: number): void {
  const got = body.details.delivered_quantity * 1000;
  assert.ok(
    Math.abs(got - truthW) <= Math.max(200, 0.1 * truthW),
    `reported ${got} W, the simulator saw ${truthW} W: ${JSON.stringify(body)}`,
  );
}

test("a 3 kW shed on a site with PV switches the relay off and never curtails PV: grid import never rises; delivery matches the simulator", async () => {
  await withDispatchRig({ irradiance: 0.5, batteries: [] }, async (rig) => {
    await until(() => (rig.simDevice("pv").power_w as number) > 2500, "pv produces");
    const pvW = rig.simDevice("pv").power_w as number;
    const shed = event({ event_type: "shed", event_quantity: 3, event_unit: "kW", priority: 20 }, 1500, 6000);
    assert.equal((await rig.dr({ mode: "live", event_slots: [shed] })).status, 200);
    const truth = await groundTruth(rig, shed);
    const body = await rig.waitResponse(shed.event_id);
    // The simulator's PV moves by its own seeded noise, ±1 % a second (a function of the wall
    // clock's second): between the sample before and one in the window, up to 2 % of its
    // power, which a fixed 20 W failed on (a CI run: 1,576 W to 1,622 W, PV about 2.9 kW).
    // Curtailing PV would raise import by kilowatts.
    const noiseW = 0.02 * pvW;
    assert.ok(truth.max <= truth.before + 20 + noiseW, `import rose from ${truth.before} W to ${truth.max} W (PV ${pvW} W)`);
    assert.equal(rig.simDevice("pv").setpoint_w, undefined, "no limit written to PV");
    assert.deepEqual(
      body.details.devices.map((d: any) => d.device_id),
      ["relay"],
    );
    assert.equal(body.status, "partial", JSON.stringify(body));
    assertTruth(body, truth.drop);
  });
});

test("without a meter a 3 kW shed counts the relay's rated loads once, never PV's drop; delivery matches the simulator, measured false", async () => {
  await withDispatchRig({ irradiance: 0.5, meter: false, relay: { rated_power_w: [400, 400, 400, 400] } }, async (rig) => {
    await until(() => (rig.simDevice("pv").power_w as number) > 2500, "pv produces");
    const shed = event({ event_type: "shed", event_quantity: 3, event_unit: "kW", priority: 20 }, 1500, 6000);
    assert.equal((await rig.dr({ mode: "live", event_slots: [shed] })).status, 200);
    const truth = await groundTruth(rig, shed);
    const body = await rig.waitResponse(shed.event_id);
    assert.equal(rig.simDevice("pv").setpoint_w, undefined, "no limit written to PV");
    assert.equal(body.details.measured, false);
    assertTruth(body, truth.drop);
  });
});

test("stacking: discharges of 3 kW (priority 10) and 5 kW (priority 20) on two 5 kW batteries deliver 3 kW and 5 kW", async () => {
  await withDispatchRig(
    {
      batteries: [
        { name: "b1", max_power_w: 5000 },
        { name: "b2", max_power_w: 5000 },
      ],
    },
    async (rig) => {
      const a = event({ event_type: "discharge", event_quantity: 3, event_unit: "kW", priority: 10 }, 1500, 10_000);
      const b = event({ event_type: "discharge", event_quantity: 5, event_unit: "kW", priority: 20 }, 1500, 10_000);
      assert.equal((await rig.dr({ mode: "live", event_slots: [a, b] })).status, 200);
      await until(
        () =>
          Math.abs((rig.simDevice("b1").power_w as number) - 4000) < 150 && Math.abs((rig.simDevice("b2").power_w as number) - 4000) < 150,
        "each battery at 4 kW",
      );
      const ra = await rig.waitResponse(a.event_id);
      const rb = await rig.waitResponse(b.event_id);
      assertMeasuredDelivery(ra, 3);
      assertMeasuredDelivery(rb, 5);
      assert.deepEqual(
        rb.details.devices.map((d: any) => d.requested_w),
        [2500, 2500],
      );
    },
  );
});
