// Dispatch on devices whose control points are scaled, over HTTPS against the simulator:
// a battery at InOutWRte_SF -2 and PV at WMaxLimPct_SF -1 are written the raw values
// their scale factors call for and deliver what was asked. And the /dr request rules of
// B4: the event_id echoed byte for byte, Feb 30 and quantity 0 refused, any GUID and
// unknown event fields accepted.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  assertMeasuredDelivery,
  makeRig,
  rigConfig,
  siteScenario,
  startSink,
  waitPaired,
  event,
  type DispatchRig,
} from "../support/dispatch.js";
import { startGateway } from "../support/gateway.js";
import { withSite, type ScenarioInput } from "../support/site.js";
import { withTmpDir } from "../support/tmp.js";
import { until } from "../support/wait.js";
import type { Dispatcher } from "../../src/dispatch/dispatcher.js";

const M124 = 40000 + 2 + 68 + 52 + 28 + 26; // SunS, model 1, 103, 120 and 123 come first in the simulated storage inverter
const M123_PV = 40000 + 2 + 68 + 52 + 28; // SunS, model 1, 103, 120

/** The dispatch rig's site with the battery's and the PV's control scale factors set. */
function scaledSite(batterySf: number, pvSf: number, irradiance: number): ScenarioInput {
  const s = siteScenario({ irradiance });
  const devices = (s.ports[0].devices as Array<Record<string, unknown>>).map((d) =>
    d.model === "sunspec-storage" ? { ...d, control_sf: batterySf } : d.model === "sunspec-pv" ? { ...d, control_sf: pvSf } : d,
  );
  return { ...s, ports: [{ ...s.ports[0], devices }] } as ScenarioInput;
}

async function withScaledRig(batterySf: number, pvSf: number, irradiance: number, fn: (rig: DispatchRig) => Promise<void>): Promise<void> {
  const sink = await startSink();
  try {
    await withSite(scaledSite(batterySf, pvSf, irradiance), (site) =>
      withTmpDir(async (dir) => {
        const gw = await startGateway(dir, rigConfig(site, sink, ["battery"]));
        try {
          await waitPaired(gw, 4);
          await fn(makeRig(site, gw, sink, dir));
        } finally {
          await gw.stop();
        }
      }),
    );
  } finally {
    await sink.stop();
  }
}

const writesAt = (rig: DispatchRig, name: string, address: number) =>
  (rig.simDevice(name).writes as Array<{ address: number; values: number[] }>).filter((w) => w.address === address);

test("battery at SF -2: a 3 kW discharge writes 6000 (60.00 %) and delivers 3 kW; a 0.14 kW discharge writes 280 (2.80 %) and is completed; a shed never writes to PV", async () => {
  await withScaledRig(-2, -1, 0.5, async (rig) => {
    // More than the relay carries (4 x 400 W): the relay is shed and PV is left alone (curtailing it raises import).
    await until(() => (rig.simDevice("pv").power_w as number) > 2500, "pv produces");
    const shed = event({ event_type: "shed", event_quantity: 2.5, event_unit: "kW", priority: 20 }, 1500, 6000);
    assert.equal((await rig.dr({ mode: "live", event_slots: [shed] })).status, 200);
    const sb = await rig.waitResponse(shed.event_id);
    assert.deepEqual(
      sb.details.devices.map((d: any) => d.device_id),
      ["relay"],
      JSON.stringify(sb),
    );
    assert.equal(writesAt(rig, "pv", M123_PV + 5).length, 0, "no PV limit written");
    assert.equal(sb.status, "partial", JSON.stringify(sb));
    await until(() => rig.simDevice("relay").coils.every((c: boolean) => c), "relay closed again at the end");

    // 140 W of 5 kW is 2.80 %: at SF -2 the register holds it exactly (whole percent would be 150 W or 100 W).
    const small = event({ event_type: "discharge", event_quantity: 0.14, event_unit: "kW" }, 1500, 4000);
    assert.equal((await rig.dr({ mode: "live", event_slots: [small] })).status, 200);
    const sm = await rig.waitResponse(small.event_id);
    assert.deepEqual(writesAt(rig, "battery", M124 + 12)[0].values, [280], "OutWRte 2.80 % at SF -2");
    assert.equal(sm.status, "completed", JSON.stringify(sm));
    await until(() => rig.simDevice("battery").power_w === 0, "battery released");

    // An uppercase id with version nibble 0, and a field the spec does not name.
    const id = "8D3F0C1A-7B2E-0C4D-9E5F-A1B2C3D4E5F6";
    const ev = {
      ...event({ event_type: "discharge", event_quantity: 3, event_unit: "kW" }, 1500, 4000),
      event_id: id,
      site_note: "added by a newer partner",
    };
    const r = await rig.dr({ mode: "live", event_slots: [ev] });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.deepEqual(r.json, [{ event_id: id, status: "accepted" }], "the receipt echoes the id byte for byte");
    await until(() => Math.abs((rig.simDevice("battery").power_w as number) - 3000) < 150, "battery discharging at 3 kW");
    assert.deepEqual(writesAt(rig, "battery", M124 + 12).at(-1)!.values, [6000], "OutWRte 60.00 % at SF -2");
    const body = await rig.waitResponse(id);
    assert.equal(body.event_id, id, "the execution response echoes the id byte for byte");
    assertMeasuredDelivery(body, 3);
    const again = await rig.dr({ mode: "live", event_slots: [{ ...ev, event_id: id.toLowerCase() }] });
    assert.deepEqual(
      again.json,
      [{ event_id: id.toLowerCase(), status: "accepted" }],
      "the same event in another case: the same command, echoed as sent",
    );
  });
});

test("/dr request rules: Feb 30 and quantity 0 get 400 and store nothing; restore 0 and a version-0 GUID are accepted", async () => {
  await withScaledRig(0, 0, 0, async (rig) => {
    const feb30 = await rig.dr({
      mode: "live",
      event_slots: [{ ...event(), start_time: "2026-02-30T12:00:00Z", end_time: "2036-03-01T12:00:00Z" }],
    });
    assert.equal(feb30.status, 400);
    assert.deepEqual(
      feb30.json.details.map((d: any) => d.path),
      ["event_slots[0].start_time"],
    );
    const midnight = await rig.dr({ mode: "live", event_slots: [{ ...event(), end_time: "2036-03-01T24:00:00Z" }] });
    assert.equal(midnight.status, 400);
    const zero = event({ event_quantity: 0 }, 1000, 3000);
    const z = await rig.dr({ mode: "live", event_slots: [zero] });
    assert.equal(z.status, 400);
    assert.deepEqual(
      z.json.details.map((d: any) => d.path),
      ["event_slots[0].event_quantity"],
    );
    // Nothing of the refused request was stored: the same id is new.
    const later = event({ event_type: "restore", event_quantity: 0, event_unit: "kW" }, 3_600_000, 60_000);
    const ok = await rig.dr({
      mode: "live",
      event_slots: [
        { ...later, event_id: zero.event_id },
        { ...event({}, 3_600_000, 60_000), event_id: "00000000-0000-0000-0000-000000000001" },
      ],
    });
    assert.equal(ok.status, 200, JSON.stringify(ok.json));
    assert.deepEqual(
      ok.json.map((x: any) => x.status),
      ["accepted", "accepted"],
    );
    const events = rig.gw.daemon.part<Dispatcher>("dispatch").list();
    assert.equal(
      events.find((e) => e.spec.event_id === zero.event_id)?.spec.quantity,
      0,
      "stored as the restore, not as the refused discharge",
    );
  });
});
