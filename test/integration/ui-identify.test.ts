// The status page's commissioning scan names the profile each unit's identity registers
// match, as `sitegate scan --identify` does: a brand device by its own registers, a SunSpec
// device by its marker, and nothing for a device that only answers.
import { test } from "node:test";
import assert from "node:assert/strict";
import { withSite } from "../support/site.js";
import { until } from "../support/wait.js";
import { Jobs } from "../../src/ui/jobs.js";
import { ModbusCommissioning } from "../../src/modbus/device/commission.js";
import { BusManager } from "../../src/modbus/bus.js";
import { builtinProfiles } from "../../src/profiles/registry.js";
import { silentLogger } from "../../src/log.js";

test("a status-page scan names the matching profile per unit, and none for a device no profile identifies", async () => {
  const scenario = {
    seed: 3,
    site: { base_load_w: 1500 },
    ports: [
      {
        kind: "tcp" as const,
        listen: "127.0.0.1:0",
        devices: [
          { unit: 1, model: "sungrow-sh", name: "sungrow", max_power_w: 5000, capacity_wh: 9600 },
          { unit: 2, model: "sunspec-storage", name: "battery", max_power_w: 5000, capacity_wh: 10000 },
          { unit: 3, model: "unknown", name: "mystery" },
        ],
      },
    ],
  };
  await withSite(scenario as never, async (site) => {
    const buses = new BusManager(silentLogger());
    const scope = { rtuPaths: [], allow: ["127.0.0.1/32"] }; // the simulator on loopback
    const jobs = new Jobs(new ModbusCommissioning(buses, builtinProfiles(), silentLogger(), scope), silentLogger());
    try {
      // A generous timeout costs nothing here (the TCP gateway answers an absent id at once
      // with exception 11) and no loaded machine misses an answer by it.
      const job = jobs.scan({ endpoint: `tcp://127.0.0.1:${site.tcpPorts[0]}`, from: 1, to: 4, timeout_ms: 3000 });
      await until(() => job.state !== "running", "the scan and its identification end");
      assert.equal(job.state, "done", job.error ?? "");
      assert.deepEqual(
        job.found.map((f) => [f.unit, f.profiles?.[0] ?? "none"]),
        [
          [1, "sungrow-sh"],
          [2, "sunspec"],
          [3, "none"],
        ],
        JSON.stringify(job.found),
      );
      // In an installer's words, as `sitegate scan --identify` prints them.
      assert.deepEqual(
        job.found.map((f) => f.words),
        [
          "unit 1: Sungrow SH-RT / SH-RS hybrid inverter with its battery (profile sungrow-sh)",
          "unit 2: SunSpec battery inverter (profile sunspec)",
          "unit 3: answers, not a known device",
        ],
      );
    } finally {
      await jobs.stop();
      await buses.closeAll();
    }
  });
});
