// withZigbeeGateway: a real mosquitto, the simulator as a zigbee2mqtt bridge on it (with a
// grid meter on Modbus TCP), and a gateway whose `zigbee` block takes the bridge's
// devices; all stopped whatever happens.
import { join } from "node:path";
import type { ConfigInput } from "../../src/config/schema.js";
import { startGateway, tcpDevice, type Gateway } from "./gateway.js";
import { startLocalBroker, type LocalBroker } from "./mosquitto.js";
import { withSite, type ScenarioInput, type SimHandle } from "./site.js";
import { withTmpDir } from "./tmp.js";
import { testCert } from "./tls.js";

export const Z2M_BASE = "zigbee2mqtt";

/** A grid meter on TCP, two plugs (one metered, one not) and a thermostat; no PV, no load noise. */
export function zigbeeScenario(broker: string, over: Partial<ScenarioInput> = {}): ScenarioInput {
  return {
    seed: 7,
    control: { listen: "127.0.0.1:0" },
    site: { base_load_w: 2000, load_noise_pct: 0, pv_irradiance: 0 },
    ports: [{ kind: "tcp", listen: "127.0.0.1:0", devices: [{ unit: 3, model: "sunspec-meter", name: "grid" }] }],
    zigbee: {
      broker,
      base_topic: Z2M_BASE,
      devices: [
        { friendly_name: "washer-plug", ieee_address: "0x00158d0001a2b3c4", kind: "plug", metering: true, load_w: 2000, load_noise_pct: 0 },
        { friendly_name: "dryer-plug", kind: "plug", metering: false, load_w: 1500, load_noise_pct: 0 },
        { friendly_name: "living-trv", kind: "thermostat", metering: true, load_w: 1500, setpoint_c: 21, room_c: 21 },
      ],
    },
    ...over,
  };
}

/** The gateway's zigbee block for zigbeeScenario (plug-1 by IEEE address, the others by friendly name). */
export function zigbeeConfig(broker: string, over: Record<string, unknown> = {}): NonNullable<ConfigInput["zigbee"]> {
  return {
    url: broker,
    base_topic: Z2M_BASE,
    command_timeout_ms: 3000,
    devices: [
      { device_id: "plug-1", ieee_address: "0x00158d0001a2b3c4", device_type: 30, shed_priority: 1 },
      { device_id: "plug-2", friendly_name: "dryer-plug", device_type: 30, rated_power_w: 1500, shed_priority: 2 },
      { device_id: "trv-1", friendly_name: "living-trv", device_type: 31, rated_power_w: 1500, shed_priority: 3, setback_c: 2 },
    ],
    ...over,
  } as NonNullable<ConfigInput["zigbee"]>;
}

export async function withZigbeeGateway(
  opts: {
    scenario?: (broker: string) => ScenarioInput;
    config?: (site: SimHandle, broker: LocalBroker) => Partial<ConfigInput>;
    /** The broker also listens with TLS (the test certificate) at broker.tlsUrl. */
    tls?: boolean;
  },
  fn: (site: SimHandle, gw: Gateway, broker: LocalBroker, dir: string) => Promise<void>,
): Promise<void> {
  await withTmpDir(async (dir) => {
    const broker = await startLocalBroker(join(dir, "broker"), opts.tls ? { tls: testCert() } : {});
    try {
      await withSite((opts.scenario ?? zigbeeScenario)(broker.url), async (site) => {
        const over: Partial<ConfigInput> = {
          telemetry: { poll_interval_ms: 250, retention_max_mb: 64, commit_interval_s: 1 },
          devices: [tcpDevice("grid", site.tcpPorts[0], 3)] as never,
          zigbee: zigbeeConfig(broker.url),
          ...(opts.config?.(site, broker) ?? {}),
        };
        const gw = await startGateway(join(dir, "gw"), over);
        try {
          await fn(site, gw, broker, dir);
        } finally {
          await gw.stop();
        }
      });
    } finally {
      await broker.stop();
    }
  });
}

export async function simControl(site: SimHandle, method: string, path: string, body?: unknown): Promise<{ status: number; json: any }> {
  const res = await fetch(site.controlUrl + path, {
    method,
    body: body === undefined ? undefined : JSON.stringify(body),
    headers: { "content-type": "application/json" },
  });
  return { status: res.status, json: await res.json().catch(() => null) };
}
