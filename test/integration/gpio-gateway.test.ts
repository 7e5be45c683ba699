// GPIO through the simulator's chip (`gpio.backend: sim`): an output is a switched load a
// shed turns off and the end of the event turns back on (the grid meter sees its load go);
// an input with `on_active: pv_limit` caps the PV inverter while it is active (debounced)
// and releases it when it is released.
import { test } from "node:test";
import assert from "node:assert/strict";
import { until } from "../support/wait.js";
import { withSite, type ScenarioInput, type SimHandle } from "../support/site.js";
import { withTmpDir } from "../support/tmp.js";
import { startGateway, tcpDevice, type Gateway } from "../support/gateway.js";
import { event, makeRig, startSink, waitPaired, type DispatchRig } from "../support/dispatch.js";
import type { SiteClock as Poller } from "../../src/telemetry/site-clock.js";
import type { Dispatcher } from "../../src/dispatch/dispatcher.js";
import { devices as statusDevices, type UiDeps } from "../../src/ui/views.js";
import { partnerTo } from "../support/partner-sink.js";
import { builtinProfiles } from "../../src/profiles/registry.js";

function scenario(): ScenarioInput {
  return {
    seed: 7,
    control: { listen: "127.0.0.1:0" },
    site: { base_load_w: 2000, load_noise_pct: 0, pv_irradiance: 0.5 },
    ports: [
      {
        kind: "tcp",
        listen: "127.0.0.1:0",
        devices: [
          { unit: 2, model: "sunspec-pv", name: "pv", max_power_w: 6000 },
          { unit: 3, model: "sunspec-meter", name: "grid" },
        ],
      },
    ],
    // The ripple-control contact is active low: at level 1 it is released.
    gpio: {
      lines: [
        { line: 17, direction: "input", value: 1 },
        { line: 27, direction: "output", load_w: 3000, value: 1 },
      ],
    },
  } as ScenarioInput;
}

async function withGpioRig(fn: (rig: DispatchRig) => Promise<void>): Promise<void> {
  const sink = await startSink();
  try {
    await withSite(scenario(), (site: SimHandle) =>
      withTmpDir(async (dir) => {
        const gw: Gateway = await startGateway(dir, {
          partner: partnerTo(sink),
          telemetry: { poll_interval_ms: 250, retention_max_mb: 64, commit_interval_s: 1 },
          devices: [
            tcpDevice("pv", site.tcpPorts[0], 2, "sunspec", { mb_device_type: 2 }),
            tcpDevice("grid", site.tcpPorts[0], 3, "sunspec", { mb_device_type: 1 }),
          ] as never,
          gpio: {
            backend: "sim",
            chip: site.controlUrl,
            lines: [
              { device_id: "boiler", line: 27, device_type: 41, rated_power_w: 3000, shed_priority: 1 },
              {
                device_id: "rse-60",
                line: 17,
                device_type: 40,
                active_low: true,
                debounce_ms: 50,
                on_active: { event_type: "pv_limit", limit_pct: 25 },
              },
            ],
          },
        });
        try {
          await waitPaired(gw, 4);
          const poller = gw.daemon.part<Poller>("poller");
          await until(() => ["pv", "grid", "boiler", "rse-60"].every((id) => poller.health(id)?.online), "every device online");
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

const gpioLevel = (rig: DispatchRig, line: number) => (rig.site.state() as any).gpio[String(line)].value as number;
const gridW = (rig: DispatchRig) => rig.simDevice("grid").power_w as number;
const pvW = (rig: DispatchRig) => rig.simDevice("pv").power_w as number;

async function setInput(rig: DispatchRig, line: number, value: 0 | 1, bounce = 0): Promise<void> {
  const res = await fetch(`${rig.site.controlUrl}/gpio/${line}`, {
    method: "POST",
    body: JSON.stringify({ value, bounce }),
    headers: { "content-type": "application/json" },
  });
  assert.equal(res.status, 200);
}

test("a shed turns a GPIO output off (the grid meter drops by its load) and the end of the event turns it back on", async () => {
  await withGpioRig(async (rig) => {
    const poller = rig.gw.daemon.part<Poller>("poller");
    assert.equal(poller.latest("boiler")?.state, 1);
    assert.equal(poller.latest("rse-60")?.state, 0, "the active-low input at level 1 is inactive");
    const sync = await rig.gw.call("GET", "/v1/api/gateway/site-001/devicesync", { headers: rig.gw.apiKeyHeaders });
    const byId = new Map<string, any>(sync.json.devices.map((d: { device_id: string }) => [d.device_id, d]));
    assert.deepEqual([byId.get("boiler").device_type, byId.get("boiler").device_max_power, byId.get("rse-60").device_type], [41, 3000, 40]);
    assert.deepEqual(byId.get("rse-60").capabilities, ["telemetry"]);
    // The status page's device list has them beside the Modbus devices.
    const page = statusDevices({ devices: rig.gw.daemon.devices, profiles: builtinProfiles() } as unknown as UiDeps);
    assert.deepEqual(
      page.map((d) => [d.device_id, d.type_name]),
      [
        ["boiler", "GPIO output"],
        ["grid", "meter"],
        ["pv", "PV inverter"],
        ["rse-60", "GPIO input"],
      ],
    );
    assert.equal(page[0].address, `${rig.site.controlUrl} line 27`);
    assert.equal(page[0].online, true);
    const metrics = await rig.gw.call("GET", "/metrics");
    assert.match(metrics.text, /sitegate_device_online\{device_id="boiler"\} 1/);

    const before = gridW(rig);
    const shed = event({ event_type: "shed", event_quantity: 2, event_unit: "kW", priority: 20 }, 1000, 5000);
    assert.equal((await rig.dr({ mode: "live", event_slots: [shed] })).status, 200);
    await until(() => gpioLevel(rig, 27) === 0, "boiler output driven low");
    await until(() => Math.abs(before - 3000 - gridW(rig)) < 150, `grid drops by the boiler's 3 kW (was ${before}, is ${gridW(rig)})`);
    const body = await rig.waitResponse(shed.event_id);
    assert.deepEqual(
      body.details.devices.map((d: any) => [d.device_id, d.status]),
      [["boiler", "completed"]],
      JSON.stringify(body),
    );
    assert.notEqual(body.status, "failed", JSON.stringify(body));
    await until(() => gpioLevel(rig, 27) === 1, "boiler output back on after the event");
  });
});

test("an active input caps the PV at limit_pct while it is active (bounces debounced into one event) and releases it when released", async () => {
  await withGpioRig(async (rig) => {
    const dispatch = rig.gw.daemon.part<Dispatcher>("dispatch");
    await until(() => Math.abs(pvW(rig) - 3000) < 100, `PV at half of 6 kW (is ${pvW(rig)})`);
    await setInput(rig, 17, 0, 3);
    await until(() => pvW(rig) <= 1500 + 30, `PV capped at 25 % of 6 kW (is ${pvW(rig)})`);
    const events = () => dispatch.list().filter((e) => e.spec.source === "input:rse-60");
    assert.equal(events().length, 1, "one event for one debounced activation");
    assert.equal(events()[0].spec.event_type, "pv_limit");
    assert.equal(events()[0].spec.priority, 0);
    assert.equal(events()[0].state, "running");

    await setInput(rig, 17, 1);
    await until(() => Math.abs(pvW(rig) - 3000) < 100, `PV released (is ${pvW(rig)})`);
    await until(() => events()[0].state === "cancelled", "the input's event ended");
    assert.equal(events().length, 1);
    assert.equal(rig.responses().length, 0, "a local event sends no execution response");
  });
});
