// A status-page scan of the RS-485 bus the daemon polls (the simulator's pty, socat) finds
// the units that answer; the probes of silent unit ids go below polling, so the polled meter
// keeps getting fresh samples during the scan; and the scan stops at its time cap with what
// it found so far.
import { test } from "node:test";
import assert from "node:assert/strict";
import { withTmpDir } from "../support/tmp.js";
import { withSite, demoScenario } from "../support/site.js";
import { startGateway, rtuDevice } from "../support/gateway.js";
import { until } from "../support/wait.js";
import { FakeClock } from "../support/fake-clock.js";
import { Jobs } from "../../src/ui/jobs.js";
import { ModbusCommissioning } from "../../src/modbus/device/commission.js";
import { builtinProfiles } from "../../src/profiles/registry.js";
import { silentLogger } from "../../src/log.js";
import type { ModbusEngine } from "../../src/modbus/part.js";
import type { SiteClock as Poller } from "../../src/telemetry/site-clock.js";

const CAP_MS = 60_000;

test("a scan of a polled serial bus: the polled device keeps fresh samples while silent ids are probed, and the scan stops at its time cap", async () => {
  await withSite(demoScenario(), (site) =>
    withTmpDir(async (dir) => {
      const gw = await startGateway(dir, {
        rtu_ports: { "1": site.rtuPeers[0] },
        telemetry: { poll_interval_ms: 250, retention_max_mb: 64, commit_interval_s: 1 },
        devices: [rtuDevice("sdm", 10, "sdm630")] as never,
      });
      const poller = gw.daemon.part<Poller>("poller");
      const clock = new FakeClock(Date.now());
      // The status page's job runner on the daemon's own buses, its time cap on a clock the test moves.
      const commissioning = new ModbusCommissioning(gw.daemon.part<ModbusEngine>("modbus").buses, builtinProfiles(), silentLogger(), {
        rtuPaths: [site.rtuPeers[0]!],
      });
      const jobs = new Jobs(commissioning, silentLogger(), { scanCapMs: CAP_MS, clock });
      try {
        await until(() => poller.health("sdm")?.online === true, "the meter is polled");
        // The units that answer, probed with a timeout no loaded machine misses (the longest a
        // probe may hold a polled bus).
        const find = jobs.scan({ endpoint: `rtu:${site.rtuPeers[0]}?baud=9600`, from: 10, to: 11, timeout_ms: 1000 });
        await until(() => find.state !== "running", "the scan of 10..11");
        assert.equal(find.state, "done", find.error ?? "");
        assert.deepEqual(
          find.found.map((f) => f.unit),
          [10, 11],
          "both units on the line found",
        );
        // Ids 20..247 are silent on this line: every probe waits for its whole timeout (and
        // as long again for a late answer to clear the line); a short one cannot miss a unit.
        const job = jobs.scan({ endpoint: `rtu:${site.rtuPeers[0]}?baud=9600`, from: 20, to: 247, timeout_ms: 200 });
        // While the next 15 silent ids are probed (15 x 200 ms of bus time), count the meter's samples.
        const stamps = new Set<number>();
        const from = job.probed;
        await until(
          () => {
            const at = poller.latestAt("sdm");
            if (at !== undefined) stamps.add(at);
            return job.probed >= from + 15 || job.state !== "running";
          },
          "15 more probes",
          60_000,
        );
        assert.equal(job.state, "running");
        assert.ok(stamps.size >= 4, `the meter got ${stamps.size} fresh samples during 15 probes; polling must not wait for the scan`);
        assert.equal(poller.health("sdm")?.online, true);

        // The time cap: the scan ends with what it found and says where to go on.
        clock.advance(CAP_MS);
        await until(() => job.state !== "running", "the scan stops at the cap");
        assert.equal(job.state, "done");
        assert.ok(job.probed < job.total, `stopped early (${job.probed}/${job.total})`);
        assert.deepEqual(job.found, []);
        assert.match(job.error ?? "", /stopped at the 60 s time cap after \d+ of 228 unit ids; scan the rest with from \d+/);
      } finally {
        await jobs.stop();
        await gw.stop();
      }
    }),
  );
});
