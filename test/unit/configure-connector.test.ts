// The configure request (spec 2.7) through the pairing family's connector: the services
// parse each entry with the family's schema, refuse what the family's rules refuse, and
// name the family in the device_id check; they know no family's fields.
import { test } from "node:test";
import assert from "node:assert/strict";
import { z } from "zod";
import { configureService, type ConfigureDeps } from "../../src/services/devices.js";
import { silentLogger } from "../../src/log.js";
import type { Device } from "../../src/model/device.js";
import type { DeviceConnector } from "../../src/devices/types.js";
import { testConfig } from "../support/config.js";
import { refusal } from "../support/issues.js";

interface ProbeEntry {
  device_id: string;
  probe_channel: number;
}

/** A family of probes that pairs configure entries of its own form: a channel 1..8, one probe per channel. */
function probes() {
  const configured: ProbeEntry[][] = [];
  const connector: DeviceConnector<ProbeEntry> = {
    family: "probes",
    entrySchema: z.strictObject({ device_id: z.string().min(1), probe_channel: z.number().int().min(1).max(8) }),
    check: (entries) =>
      entries.flatMap((e, i) =>
        entries.findIndex((x) => x.probe_channel === e.probe_channel) < i
          ? [{ path: `devices[${i}].probe_channel`, message: `channel ${e.probe_channel} is taken` }]
          : [],
      ),
    configure: async (entries) => {
      configured.push(entries);
      return entries.map((e) => ({ device_id: e.device_id, status: "accepted" as const, message: "paired" }));
    },
  };
  const held = [{ id: "plug-1", info: () => ({ family: "zigbee" }) }] as unknown as Device[];
  const deps: ConfigureDeps = {
    config: testConfig("/tmp/sitegate-probes"),
    connector: connector as unknown as DeviceConnector,
    devices: { list: () => held },
    log: silentLogger(),
  };
  return { deps, configured };
}

test("configure parses each entry with the connector's schema and configures the family's entries as parsed", async () => {
  const { deps, configured } = probes();
  const answer = await configureService({ devices: [{ device_id: "p1", probe_channel: 3 }] }, deps);
  assert.deepEqual(answer.devices, [{ device_id: "p1", status: "accepted", message: "paired" }]);
  assert.deepEqual(configured, [[{ device_id: "p1", probe_channel: 3 }]]);
});

test("an entry outside the connector's schema, or one its rules refuse, is a 400 by path; nothing is configured", async () => {
  const { deps, configured } = probes();
  const modbusLike = await refusal(
    configureService({ devices: [{ device_id: "m1", device_type: "modbus", mb_type: 2, mb_ip: "127.0.0.1", mb_port: 502 }] }, deps),
  );
  assert.ok(
    modbusLike.details.some((d) => d.path.startsWith("devices[0]")),
    JSON.stringify(modbusLike.details),
  );
  const taken = await refusal(
    configureService(
      {
        devices: [
          { device_id: "p1", probe_channel: 3 },
          { device_id: "p2", probe_channel: 3 },
        ],
      },
      deps,
    ),
  );
  assert.deepEqual(taken.details, [{ path: "devices[1].probe_channel", message: "channel 3 is taken" }]);
  assert.deepEqual(configured, []);
});

test("the device_id check names the connector's family", async () => {
  const { deps, configured } = probes();
  const e = await refusal(configureService({ devices: [{ device_id: "plug-1", probe_channel: 1 }] }, deps));
  assert.match(e.details[0]?.message ?? "", /devices\[0\] \(probes\) and the zigbee device \(zigbee\) both name it/);
  assert.deepEqual(configured, []);
});
