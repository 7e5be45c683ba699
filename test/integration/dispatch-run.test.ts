// Dispatch against the simulated site: the battery and the grid meter follow the
// requested power, shed opens relays and curtails PV, restore undoes it, and each event
// gets one measured execution response.
import { test } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { event, withDispatchRig } from "../support/dispatch.js";
import { until } from "../support/wait.js";
import type { Dispatcher } from "../../src/dispatch/dispatcher.js";

const writesOf = (d: Record<string, any>) => (d.writes as unknown[]).length;

test("discharge moves the battery and the grid meter by about the requested power; one measured execution response", async () => {
  await withDispatchRig({}, async (rig) => {
    const gridBefore = rig.simDevice("grid").power_w as number;
    const ev = event({ event_type: "discharge", event_quantity: 3, event_unit: "kW" }, 1500, 4000);
    const r = await rig.dr({ mode: "live", event_slots: [ev] });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.deepEqual(r.json, [{ event_id: ev.event_id, status: "accepted" }]);
    await until(() => Math.abs((rig.simDevice("battery").power_w as number) - 3000) < 150, "battery discharging at 3 kW");
    assert.ok(Math.abs(gridBefore - (rig.simDevice("grid").power_w as number) - 3000) < 300, "grid import drops by about 3 kW");
    const sync = await rig.gw.call("GET", "/v1/api/gateway/site-001/devicesync", { headers: rig.gw.apiKeyHeaders });
    await until(async () => {
      const s = await rig.gw.call("GET", "/v1/api/gateway/site-001/devicesync", { headers: rig.gw.apiKeyHeaders });
      return s.json.devices.find((d: any) => d.device_id === "battery").device_op_mode === 2;
    }, "device sync shows op mode 2");
    assert.equal(sync.status, 200);
    const body = await rig.waitResponse(ev.event_id);
    assert.equal(body.status, "completed", JSON.stringify(body));
    assert.equal(body.details.mode, "live");
    assert.equal(body.details.unit, "kW");
    assert.equal(body.details.measured, true);
    assert.ok(Math.abs(body.details.delivered_quantity - 3) < 0.15, `delivered ${body.details.delivered_quantity}`);
    const dev = body.details.devices.find((d: any) => d.device_id === "battery");
    assert.equal(dev.status, "completed");
    assert.equal(dev.requested_w, 3000);
    // Released at the end: back to idle.
    await until(() => rig.simDevice("battery").power_w === 0, "battery released");
    await sleep(600);
    assert.equal(rig.responses().filter((x) => x.body.event_id === ev.event_id).length, 1, "one response");
  });
});

test("charge makes the battery absorb the requested power and the grid import rise; a partner that is down gets the response later", async () => {
  await withDispatchRig({}, async (rig) => {
    const gridBefore = rig.simDevice("grid").power_w as number;
    const ev = event({ event_type: "charge", event_quantity: 2000, event_unit: "w" }, 1000, 3000);
    assert.equal((await rig.dr({ mode: "live", event_slots: [ev] })).status, 200);
    await rig.sink.refuse();
    await until(() => Math.abs((rig.simDevice("battery").power_w as number) + 2000) < 150, "battery charging at 2 kW");
    assert.ok(Math.abs((rig.simDevice("grid").power_w as number) - gridBefore - 2000) < 300, "grid import rises by about 2 kW");
    const dispatcher = rig.gw.daemon.part<Dispatcher>("dispatch");
    await until(() => dispatcher.list().some((e) => e.spec.event_id === ev.event_id && e.state === "done"), "event done while the partner is down");
    await sleep(1500);
    assert.equal(rig.responses().length, 0);
    await rig.sink.accept();
    const body = await rig.waitResponse(ev.event_id);
    assert.equal(body.status, "completed", JSON.stringify(body));
    assert.ok(Math.abs(body.details.delivered_quantity - 2000) < 100);
  });
});

test("shed opens the relay and curtails PV, grid import drops; restore closes the relay again", async () => {
  await withDispatchRig({ irradiance: 0.5 }, async (rig) => {
    await sleep(1200); // a baseline of meter readings before the start
    assert.equal(rig.simDevice("relay").coils.every((c: boolean) => c), true);
    const gridBefore = rig.simDevice("grid").power_w as number;
    const pvBefore = rig.simDevice("pv").power_w as number;
    assert.ok(pvBefore > 2500, `pv produces (${pvBefore} W)`);
    // More than the relay carries (4 x 400 W): the rest comes from curtailing PV.
    const shed = event({ event_type: "shed", event_quantity: 2.5, event_unit: "kW", priority: 20 }, 1500, 5000);
    assert.equal((await rig.dr({ mode: "live", event_slots: [shed] })).status, 200);
    await until(() => rig.simDevice("relay").coils.every((c: boolean) => !c), "relay coils open");
    await until(() => (rig.simDevice("pv").setpoint_w ?? Infinity) < pvBefore, "PV curtailed");
    assert.ok((rig.simDevice("grid").power_w as number) < gridBefore, "grid import drops");
    const body = await rig.waitResponse(shed.event_id);
    assert.ok(["completed", "partial"].includes(body.status), JSON.stringify(body));
    assert.deepEqual(body.details.devices.map((d: any) => d.device_id).sort(), ["pv", "relay"]);
    // End of the shed: devices back to their own mode.
    await until(() => rig.simDevice("relay").coils.every((c: boolean) => c), "relay closed again at the end");
    // restore as an event of its own, while a second shed runs at a lower priority.
    const shed2 = event({ event_type: "shed", event_quantity: 1, event_unit: "kW", priority: 50 }, 800, 8000);
    assert.equal((await rig.dr({ mode: "live", event_slots: [shed2] })).status, 200);
    await until(() => rig.simDevice("relay").coils.every((c: boolean) => !c), "relay open for the second shed");
    const restore = event({ event_type: "restore", event_quantity: 1, event_unit: "kW", priority: 5 }, 500, 2000);
    assert.equal((await rig.dr({ mode: "live", event_slots: [restore] })).status, 200);
    await until(() => rig.simDevice("relay").coils.every((c: boolean) => c), "restore closes the relay");
    const rb = await rig.waitResponse(restore.event_id);
    assert.equal(rb.status, "completed", JSON.stringify(rb));
    assert.ok(writesOf(rig.simDevice("relay")) >= 3);
  });
});
