// Operations: process and bus metrics in /metrics, the TLS certificate expiry warning in
// /healthz, and the onHealthy() hook (fires only after a first successful poll).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Agent, request } from "undici";
import { withSite, type ScenarioInput } from "../support/site.js";
import { withTmpDir } from "../support/tmp.js";
import { startGateway, tcpDevice, withGateway } from "../support/gateway.js";
import { testConfigInput } from "../support/config.js";
import { until } from "../support/wait.js";
import { selfSignedCert } from "../support/tls.js";
import type { ModbusPolling } from "../../src/modbus/device/polling.js";
import type { ConfigInput } from "../../src/config/schema.js";
import { VERSION } from "../../src/version.js";
import { spawnDaemon } from "../support/daemon-process.js";

const oneDevice: ScenarioInput = {
  seed: 1,
  control: { listen: "127.0.0.1:0" },
  site: { pv_irradiance: 0.5 },
  ports: [{ kind: "tcp", listen: "127.0.0.1:0", devices: [{ unit: 1, model: "sunspec-meter", name: "grid" }] }],
};

function metricValues(text: string, name: string): Array<{ labels: string; value: number }> {
  return text
    .split("\n")
    .filter((l) => l.startsWith(name + " ") || l.startsWith(name + "{"))
    .map((l) => ({ labels: l.slice(name.length, l.lastIndexOf(" ")), value: Number(l.slice(l.lastIndexOf(" ") + 1)) }));
}

test("/metrics has process, event-loop, GC, bus and outbox-age metrics", async () => {
  await withSite(oneDevice, (site) =>
    withTmpDir(async (dir) => {
      const gw = await startGateway(dir, { devices: [tcpDevice("grid", site.tcpPorts[0], 1, "sunspec")] as ConfigInput["devices"] });
      try {
        const poller = gw.daemon.part<ModbusPolling>("modbus-polling");
        await until(() => poller.stats.reads_ok >= 2, "two successful polls");
        let _junk: number[][] = [];
        const scrape = async () => (await gw.call("GET", "/metrics")).text;
        // Allocate until the GC observer has seen a collection (scavenges are certain to come).
        await until(async () => {
          _junk = Array.from({ length: 2000 }, () => new Array(100).fill(Math.random()));
          return metricValues(await scrape(), "sitegate_gc_seconds_total").length > 0;
        }, "a garbage collection to be counted");
        const text = await scrape();
        const one = (name: string) => {
          const v = metricValues(text, name);
          assert.ok(v.length > 0, `${name} missing`);
          return v;
        };
        assert.deepEqual(one("sitegate_build_info"), [
          { labels: `{version="${VERSION}",node="${process.versions.node}",arch="${process.arch}"}`, value: 1 },
        ]);
        assert.ok(one("process_resident_memory_bytes")[0].value > 10 * 1024 * 1024);
        assert.ok(one("nodejs_heap_size_used_bytes")[0].value > 0);
        assert.ok(one("nodejs_heap_size_total_bytes")[0].value >= one("nodejs_heap_size_used_bytes")[0].value);
        assert.ok(one("process_cpu_seconds_total")[0].value > 0);
        assert.ok(one("process_open_fds")[0].value > 3);
        // a histogram: cumulative buckets ending in +Inf = _count
        const buckets = one("sitegate_event_loop_lag_seconds_bucket");
        assert.equal(buckets.at(-1)!.labels, '{le="+Inf"}');
        assert.ok(
          buckets.every((b, i) => i === 0 || b.value >= buckets[i - 1].value),
          "cumulative",
        );
        assert.equal(buckets.at(-1)!.value, one("sitegate_event_loop_lag_seconds_count")[0].value);
        assert.match(text, /^# TYPE sitegate_event_loop_lag_seconds histogram$/m);
        // one family per name, and no gauge of "since the previous scrape"
        const types = text
          .split("\n")
          .filter((l) => l.startsWith("# TYPE "))
          .map((l) => l.split(" ")[2]);
        assert.deepEqual(types, [...new Set(types)], "no family twice");
        assert.ok(!types.includes("sitegate_bus_utilisation") && !types.includes("sitegate_bus_queued"));
        assert.ok(one("sitegate_gc_runs_total").some((v) => v.value > 0));
        const bus = `{bus="tcp://127.0.0.1:${site.tcpPorts[0]}"}`;
        const busy = one("sitegate_bus_busy_seconds_total").find((v) => v.labels === bus);
        assert.ok(busy && busy.value > 0, `bus busy time: ${text}`);
        assert.ok(one("sitegate_bus_queue_depth").some((v) => v.labels === bus));
        // The partner URL of the test config refuses connections: the push backlog ages.
        const ages = one("sitegate_uplink_oldest_age_seconds");
        assert.equal(ages.find((v) => v.labels === '{lane="execution"}')?.value, 0, "no execution response waits");
        assert.ok((ages.find((v) => v.labels === '{lane="data_push"}')?.value ?? 0) > 0, "the oldest unsent snapshot has an age");
        // A certificate valid for ten years gives no warning.
        assert.deepEqual((await gw.call("GET", "/healthz")).json.warnings, []);
      } finally {
        await gw.stop();
      }
    }),
  );
});

test("/healthz warns when the HTTPS certificate expires within 14 days", async () => {
  await withTmpDir(async (dir) => {
    const cert = join(dir, "cert.pem");
    const key = join(dir, "key.pem");
    selfSignedCert(cert, key, 5);
    const gw = await startGateway(join(dir, "data"), { http: { listen: "127.0.0.1:0", tls: { cert, key } } });
    const agent = new Agent({ connect: { ca: readFileSync(cert, "utf8") } });
    try {
      const res = await request(`${gw.url}/healthz`, { dispatcher: agent });
      const body = (await res.body.json()) as { status: string; warnings: Array<{ code: string; message: string }> };
      assert.equal(res.statusCode, 200, "an expiring certificate is a warning, not an outage");
      assert.equal(body.status, "ok");
      assert.equal(body.warnings.length, 1, JSON.stringify(body));
      assert.equal(body.warnings[0].code, "tls_cert_expiring");
      assert.match(body.warnings[0].message, /expires at \d{4}-\d\d-\d\dT.*in [45] days/);
    } finally {
      await agent.close();
      await gw.stop();
    }
  });
});

test("onHealthy() fires only after a first successful poll of the configured devices", async () => {
  await withSite(oneDevice, (site) =>
    withTmpDir(async (dir) => {
      // First run: pair the device, so the registry holds it.
      const first = await startGateway(dir, { devices: [tcpDevice("grid", site.tcpPorts[0], 1, "sunspec")] as ConfigInput["devices"] });
      await until(() => first.daemon.part<ModbusPolling>("modbus-polling").stats.reads_ok > 0, "the device to be paired and polled");
      await first.stop();
      // Second run: the device does not answer.
      site.setFault({ device: "grid", fault: "no_answer" });
      const gw = await startGateway(dir, {});
      try {
        const poller = gw.daemon.part<ModbusPolling>("modbus-polling");
        let calls = 0;
        let readsOkAtCall = -1;
        gw.daemon.health.onHealthy(() => {
          calls++;
          readsOkAtCall = poller.stats.reads_ok;
        });
        await until(() => poller.stats.reads_failed >= 2, "two failed polls");
        assert.equal(calls, 0, "not healthy while no poll has succeeded");
        assert.equal(gw.daemon.health.isHealthy, false);
        site.clearFaults();
        await until(() => calls > 0, "onHealthy to fire once the device answers");
        assert.equal(calls, 1);
        assert.ok(readsOkAtCall > 0);
        // A late subscriber is called at once.
        let late = false;
        gw.daemon.health.onHealthy(() => {
          late = true;
        });
        await until(() => late, "a late onHealthy subscriber to be called");
      } finally {
        await gw.stop();
      }
    }),
  );
});

test("/healthz and /metrics refuse a source outside http.metrics_allow (403) while the partner API still answers it", async () => {
  const http = (metrics_allow: string[]) => (dir: string) => ({ http: { ...testConfigInput(dir).http, metrics_allow } });
  // Loopback's neighbours only: 127.0.0.1 is outside.
  await withGateway(
    async (gw) => {
      for (const path of ["/healthz", "/metrics"]) {
        const r = await gw.call("GET", path);
        assert.equal(r.status, 403, `${path}: ${r.text}`);
        assert.equal(r.json.error, "forbidden");
        assert.match(r.json.message, /127\.0\.0\.1 may not read/);
        assert.doesNotMatch(r.text, /sitegate_|uptime_s/, "nothing of the answer leaks");
      }
      const sync = await gw.deviceSync();
      assert.equal(sync.status, 200, "the partner API has its own allowlist");
    },
    http(["127.0.0.2/32", "::1/128", "10.0.0.0/8"]),
  );
  // The same gateway with the source on the list answers.
  await withGateway(
    async (gw) => {
      assert.equal((await gw.call("GET", "/healthz")).status, 200);
      assert.equal((await gw.call("GET", "/metrics")).status, 200);
    },
    http(["10.0.0.0/8", "127.0.0.1/32"]),
  );
});

test("/healthz says degraded: unfinished config while init's placeholder organization id is left; the gateway serves", async () => {
  await withTmpDir(async (dir) => {
    // the partner URLs stay on loopback (a test reaches nothing else); the organization is init's placeholder
    const gw = await startGateway(join(dir, "data"), { organization_id: "00000000-0000-0000-0000-000000000000" });
    try {
      const h = await gw.call("GET", "/healthz");
      assert.equal(h.status, 200, "a warning, not an outage: the unit and a bench run on");
      assert.equal(h.json.status, "ok");
      const unfinished = (h.json.warnings as Array<{ code: string; message: string }>).filter((w) => w.code === "unfinished_config");
      assert.deepEqual(unfinished, [
        { code: "unfinished_config", message: "degraded: unfinished config: organization_id (sitegate check-config names each)" },
      ]);
    } finally {
      await gw.stop();
    }
  });
});

test("/healthz with a finished config has no unfinished_config warning", async () => {
  await withTmpDir(async (dir) => {
    const gw = await startGateway(join(dir, "data"), {});
    try {
      const h = await gw.call("GET", "/healthz");
      assert.equal(h.status, 200);
      assert.ok(!(h.json.warnings as Array<{ code: string }>).some((w) => w.code === "unfinished_config"), JSON.stringify(h.json));
    } finally {
      await gw.stop();
    }
  });
});

test("sitegate run with init's placeholder organization id logs it by name at warn, and runs", async () => {
  await withTmpDir(async (dir) => {
    const d = await spawnDaemon(dir, { organization_id: "00000000-0000-0000-0000-000000000000" });
    try {
      const warned = d.lines.filter((l) => l.msg === "config: unfinished, set it for the site");
      assert.equal(warned.length, 1, JSON.stringify(d.lines.filter((l) => Number(l.level) >= 40)));
      assert.equal(warned[0]?.level, 40);
      assert.match(
        String(warned[0]?.warning),
        /^unfinished config: organization_id: 00000000-0000-0000-0000-000000000000 is the placeholder/,
      );
      assert.ok(d.alive(), "it goes on");
    } finally {
      await d.stop();
    }
  });
});
