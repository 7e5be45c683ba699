// Dispatch through the real daemon to every battery brand: the seven brand models of
// brands.yaml on one simulated port, each configured by its built-in profile
// (device_integration <org>/<name>). One charge event and then one discharge event cover
// them all at once; each device's own power register (the simulator's reading of the
// brand's document, not the profile's) must show the battery charging and then
// discharging, each device must deliver its share within the measurement rules,
// and at the end every device must be back in its own self-consumption mode by its mode
// registers.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Bus } from "../../src/modbus/bus.js";
import { silentLogger } from "../../src/log.js";
import { builtinProfiles } from "../../src/profiles/registry.js";
import { BATTERY_BRANDS, BATTERY_REGISTERS, brandsOnTcp } from "../support/brands.js";
import { event, makeRig, startSink, waitPaired, POLL_MS } from "../support/dispatch.js";
import { partnerTo } from "../support/partner-sink.js";
import { startGateway, tcpDevice } from "../support/gateway.js";
import { withSite } from "../support/site.js";
import { withTmpDir } from "../support/tmp.js";
import { until } from "../support/wait.js";
import type { ConfigInput } from "../../src/config/schema.js";

/** Each battery brand of the table by its model, at its unit in brandsOnTcp. */
const UNITS: Record<string, number> = Object.fromEntries(BATTERY_BRANDS.map((b) => [b.model, b.unit]));
const PER_DEVICE_W = 1500;

test("the daemon charges and discharges every battery brand by its profile, sign right by the device's own register, and releases each to its own mode", async () => {
  const sink = await startSink();
  try {
    await withSite(brandsOnTcp(), (site) =>
      withTmpDir(async (dir) => {
        const port = site.tcpPorts[0];
        // A profile that reads no rated power (Deye, Victron): the config gives the nameplate.
        const devices = Object.entries(UNITS).map(([name, unit]) =>
          tcpDevice(name, port, unit, name, {
            mb_device_type: 3,
            ...(builtinProfiles().get(name).max_power ? {} : { rated_power_w: 5000 }),
          }),
        );
        const gw = await startGateway(dir, {
          partner: partnerTo(sink),
          telemetry: { poll_interval_ms: POLL_MS, retention_max_mb: 64, commit_interval_s: 1 },
          devices: devices as ConfigInput["devices"],
        });
        const bus = new Bus({ kind: "tcp", host: "127.0.0.1", port }, silentLogger());
        const read = (unit: number, table: "holding" | "input", address: number, count: number) => bus.read(unit, table, address, count);
        // As a client of each brand waits after connecting (a Huawei does not answer just after a connect).
        for (const b of BATTERY_BRANDS) bus.setDeviceDelay(b.unit, 0, builtinProfiles().get(b.model).connect_delay_ms);
        const powers = async () =>
          Object.fromEntries(
            await Promise.all(Object.entries(UNITS).map(async ([n, u]) => [n, await BATTERY_REGISTERS[n].powerW(read, u)] as const)),
          );
        try {
          await waitPaired(gw, devices.length);
          const rig = makeRig(site, gw, sink, dir);
          const total = PER_DEVICE_W * devices.length;
          const charge = event({ event_type: "charge", event_quantity: total, event_unit: "w" }, 1500, 6000);
          const discharge = event({ event_type: "discharge", event_quantity: total, event_unit: "w" }, 9000, 6000);
          const r = await rig.dr({ mode: "live", event_slots: [charge, discharge] });
          assert.equal(r.status, 200, JSON.stringify(r.json));

          // In self-consumption each brand covers its share of the site's load (about +500 W
          // here): charging is a negative power, discharging more than that share.
          await untilAll(powers, (w) => w < -250, "every battery charging by its own register");
          await untilAll(powers, (w) => w > PER_DEVICE_W / 2, "every battery discharging by its own register");

          for (const ev of [charge, discharge]) {
            const body = await rig.waitResponse(ev.event_id, 60_000);
            // One late poll on a loaded machine can take the event under 95 %: partial, not failed.
            assert.ok(["completed", "partial"].includes(body.status), JSON.stringify(body));
            assert.equal(body.details.measured, true, JSON.stringify(body));
            const byDevice = Object.fromEntries(body.details.devices.map((d: any) => [d.device_id, d]));
            for (const name of Object.keys(UNITS)) {
              const d = byDevice[name];
              assert.ok(d && d.requested_w > 0, `${ev.event_type} ${name} took a share: ${JSON.stringify(body)}`);
              // Every brand, the Victron GX too (ESS mode 3: its battery follows the setpoint, not
              // the house load; issue 42), delivers its share. 0.85, not 0.9: on a loaded machine one late poll keeps a sample of the ramp (seen once:
              // Huawei 1,887 of 2,100 W at coverage 0.999, under faketime with other suites running).
              const floor = 0.85;
              // Over the driven part of the window (coverage): the time before the first reading
              // after the first write counts as nothing delivered, longer on a busy machine.
              const driven = floor * d.requested_w * body.details.coverage;
              assert.ok(d.delivered_w >= driven, `${ev.event_type} ${name} delivered: ${JSON.stringify(d)}, ${body.details.coverage}`);
              // ... and no more.
              assert.ok(d.delivered_w <= 1.1 * d.requested_w, `${ev.event_type} ${name} delivered no more: ${JSON.stringify(d)}`);
            }
          }

          const mode = async () =>
            Object.fromEntries(
              await Promise.all(
                Object.entries(UNITS).map(async ([n, u]) => [n, await BATTERY_REGISTERS[n].selfConsumption(read, u)] as const),
              ),
            );
          await untilAll(mode, Boolean, "every battery back in its own self-consumption mode", 30_000);
        } finally {
          await bus.close();
          await gw.stop();
        }
      }),
    );
  } finally {
    await sink.stop();
  }
});

/** Waits until every device's value holds `ok`; a timeout names the last values read. */
async function untilAll<T>(
  values: () => Promise<Record<string, T>>,
  ok: (v: T) => boolean,
  what: string,
  timeoutMs = 20_000,
): Promise<void> {
  let last: Record<string, T> = {};
  try {
    await until(
      async () => {
        last = await values();
        return Object.values(last).every(ok);
      },
      what,
      timeoutMs,
    );
  } catch (e) {
    throw new Error(`${(e as Error).message}: ${JSON.stringify(last)}`, { cause: e });
  }
}
