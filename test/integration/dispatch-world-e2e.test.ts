// A handful of the property test's worlds end to end: the simulator on real sockets, the
// whole daemon (pairing, poller, dispatcher, HTTPS API, execution responses to a partner
// sink), events sent to /dr in real time. The same invariants as in process
// (test/support/dispatch-world.ts), with the simulator's models read directly for the
// truth; without a shadow site, a device's effect is taken against its state before any
// event (no load noise, PV pinned, so that is what the site would do without dispatch).
import { test } from "node:test";
import assert from "node:assert/strict";
import type { ConfigInput } from "../../src/config/schema.js";
import type { Dispatcher } from "../../src/dispatch/dispatcher.js";
import type { ExecutionResponse } from "../../src/dispatch/executor.js";
import { PvInverter, StorageInverter } from "../../hw-sim/models/sunspec-devices.js";
import { Relay } from "../../hw-sim/models/relay.js";
import {
  claimsOf,
  gatewayDevices,
  horizonOf,
  modbusPair,
  outcome,
  sampleEvents,
  scenarioOf,
  trackEvents,
  type Invariant,
  type Running,
  type WorldSpec,
} from "../support/dispatch-world.js";
import { E2E_WORLDS } from "../support/dispatch-world-cases.js";
import { TEST_ORG } from "../support/config.js";
import { waitPaired } from "../support/dispatch.js";
import { startGateway, type Gateway } from "../support/gateway.js";
import { partnerTo, startSink, type PartnerSink } from "../support/partner-sink.js";
import { withSite, type SimHandle } from "../support/site.js";
import { withTmpDir } from "../support/tmp.js";
import { until } from "../support/wait.js";

const SAMPLE_MS = 250;
const SETTLE_S = 4;

/** A device's effect on grid import against its state before any event (W). */
function deltaOf(site: SimHandle, id: string, relayLoad: ReadonlyMap<string, number>): number {
  const d = site.device(id);
  if (d instanceof StorageInverter) return -d.acPowerW();
  if (d instanceof PvInverter) return d.availableW() - d.acPowerW();
  if (d instanceof Relay) return d.loadW() - (relayLoad.get(id) ?? 0);
  return 0;
}

function body(e: Running, t0: number, cancelled: boolean) {
  const ev = e.ev;
  return {
    mode: "live",
    event_slots: [
      {
        event_id: e.id,
        start_time: new Date(t0 + ev.start_s * 1000).toISOString(),
        end_time: new Date(t0 + (ev.start_s + ev.duration_s) * 1000).toISOString(),
        event_type: ev.type,
        event_quantity: ev.quantity_kw,
        event_unit: "kW",
        priority: ev.priority,
        mandatory: ev.mandatory,
        cancelled,
      },
    ],
  };
}

async function runLive(w: WorldSpec, site: SimHandle, gw: Gateway, sink: PartnerSink): Promise<string[]> {
  const ids = site.scenario.ports[0].devices.map((d) => d.name);
  const initial = new Map(ids.map((id) => [id, modbusPair(id, site.device(id) as never, site.device(id) as never).state()]));
  const relayLoad = new Map(ids.filter((id) => site.device(id) instanceof Relay).map((id) => [id, (site.device(id) as Relay).loadW()]));
  const dispatcher = gw.daemon.part<Dispatcher>("dispatch");
  const violations: string[] = [];
  const fail = (invariant: Invariant, message: string) => violations.push(`${invariant}: ${message}`);
  // Whole seconds from a second boundary ahead, as the world's timeline counts them.
  const t0 = Math.ceil(Date.now() / 1000) * 1000 + 1000;
  const events = trackEvents(w, t0);
  const dr = (b: unknown) => gw.call("POST", "/v1/api/gateway/site-001/dr", { body: b, headers: gw.apiKeyHeaders });
  const horizon = t0 + horizonOf(w, SETTLE_S) * 1000;
  for (let next = t0; next < horizon; next += SAMPLE_MS) {
    // wait: the truth is sampled on a fixed grid of real time, as the simulator runs in real time
    await new Promise((r) => setTimeout(r, Math.max(0, next - Date.now())));
    const s = (next - t0) / 1000;
    for (const e of events) {
      if (s === e.ev.submit_s) {
        const r = await dr(body(e, t0, false));
        assert.equal(r.status, 200, r.text);
        e.submitted = true;
      }
      // A restore may have ended a shed already: its cancellation is refused (409), rightly.
      if (s === e.ev.cancel_s && e.submitted) assert.ok([200, 409].includes((await dr(body(e, t0, true))).status));
    }
    const delta = new Map(ids.map((id) => [id, deltaOf(site, id, relayLoad)]));
    sampleEvents(delta, events, claimsOf(dispatcher), Date.now(), fail, s);
  }
  const expected = events.filter((e) => !e.cancelledBeforeStart).map((e) => e.id);
  await until(
    () => expected.every((id) => sink.accepted("/exec").some((r) => (r.body as ExecutionResponse).event_id === id)),
    "every execution response",
    30_000,
  );
  const responses = sink.accepted("/exec").map((r) => r.body as ExecutionResponse);
  for (const e of events) outcome(w, e, responses, fail);
  for (const id of ids) {
    const now = modbusPair(id, site.device(id) as never, site.device(id) as never).state();
    if (now !== initial.get(id)) fail("pre_state", `${id} at the end reads "${now}", before any event "${initial.get(id)}"`);
  }
  return violations;
}

for (const c of E2E_WORLDS) {
  test(`end to end: ${c.name}`, { timeout: 180_000 }, async () => {
    const sink = await startSink();
    try {
      await withSite(scenarioOf(c.world), (site) =>
        withTmpDir(async (dir) => {
          const devices = gatewayDevices(c.world, "127.0.0.1", site.tcpPorts[0], TEST_ORG).modbus;
          const gw = await startGateway(dir, {
            partner: partnerTo(sink),
            telemetry: { poll_interval_ms: 1000, retention_max_mb: 64, commit_interval_s: 1 },
            devices: devices as ConfigInput["devices"],
          });
          try {
            await waitPaired(gw, devices.length);
            const violations = await runLive(c.world, site, gw, sink);
            assert.deepEqual(violations, []);
          } finally {
            await gw.stop();
          }
        }),
      );
    } finally {
      await sink.stop();
    }
  });
}
