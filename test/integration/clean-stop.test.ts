// A clean stop puts every device back, however it is asked for: four batteries on one
// RTU bus at 9600 baud (the slowest line the gateway supports well) discharging, then
// SIGINT and, while the daemon is stopping, SIGTERM (what `make run`'s Ctrl-C and a
// systemd stop do together). The second signal does not cut the stop short: every battery
// is released (the simulator shows no setpoint), "stopped" is logged and the exit code is 0.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Agent, request } from "undici";
import { withSite, type ScenarioInput } from "../support/site.js";
import { withTmpDir } from "../support/tmp.js";
import { spawnDaemon } from "../support/daemon-process.js";
import { rtuDevice } from "../support/gateway.js";
import { event } from "../support/dispatch.js";
import { TEST_API_KEY } from "../support/config.js";
import { testCert } from "../support/tls.js";
import { until } from "../support/wait.js";
import { exited } from "../support/cli.js";
import { STOP_BUDGET_MS } from "../../src/lifecycle.js";

const BATTERIES = ["battery-1", "battery-2", "battery-3", "battery-4"];

function rtuSite(): ScenarioInput {
  return {
    seed: 7,
    control: { listen: "127.0.0.1:0" },
    site: { base_load_w: 3000, load_noise_pct: 0, pv_irradiance: 0 },
    ports: [
      {
        kind: "rtu",
        path: "ttySIM",
        peer: "ttyGW",
        baud: 9600,
        line_timing: true,
        turnaround_ms: 5,
        devices: BATTERIES.map((name, i) => ({
          unit: i + 1,
          model: "sunspec-storage" as const,
          name,
          max_power_w: 5000,
          capacity_wh: 20000,
          soc_pct: 50,
        })),
      },
    ],
  };
}

async function call(url: string, method: "GET" | "POST", path: string, body?: unknown): Promise<{ status: number; json: any }> {
  const agent = new Agent({ connect: { ca: testCert().cert } });
  try {
    const r = await request(url + path, {
      method,
      headers: { "x-api-key": TEST_API_KEY, ...(body ? { "content-type": "application/json" } : {}) },
      body: body ? JSON.stringify(body) : undefined,
      dispatcher: agent,
    });
    return { status: r.statusCode, json: await r.body.json() };
  } finally {
    await agent.close();
  }
}

test("SIGINT then SIGTERM during a discharge on a 9600 baud RTU bus: four batteries put back, stopped, exit 0", async () => {
  await withSite(rtuSite(), async (site) => {
    await withTmpDir(async (dir) => {
      const d = await spawnDaemon(dir, {
        rtu_ports: { "1": site.rtuPeers[0] },
        telemetry: { poll_interval_ms: 1000, retention_max_mb: 64, commit_interval_s: 10 },
        devices: BATTERIES.map((id, i) => rtuDevice(id, i + 1, "sunspec", { mb_device_type: 3 })) as never,
      });
      try {
        await until(
          async () => (await call(d.url, "GET", "/v1/api/gateway/site-001/devicesync")).json.devices?.length === BATTERIES.length,
          "four batteries paired",
          60_000,
        );
        const ev = event({ event_quantity: 16, event_unit: "kW" }, 1500, 600_000);
        assert.equal((await call(d.url, "POST", "/v1/api/gateway/site-001/dr", { mode: "live", event_slots: [ev] })).status, 200);
        const sim = (name: string) => site.state().devices[name] as { power_w: number; setpoint_w: number };
        await until(() => BATTERIES.every((b) => sim(b).power_w > 0), "every battery discharging", 60_000);

        d.child.kill("SIGINT");
        await until(() => d.lines.some((l) => l.msg === "stopping"), "the daemon stopping");
        d.child.kill("SIGTERM");
        const code = await exited(d.child);

        assert.equal(code, 0, "exit code 0, not killed by the second signal");
        const msgs = d.lines.map((l) => String(l.msg));
        assert.ok(msgs.includes("stopped"), "the stopped line");
        assert.ok(!msgs.includes("devices not put back at stop; the next start releases them"), "every device put back");
        assert.ok(!msgs.includes("part failed to stop cleanly"), "no part abandoned");
        for (const b of BATTERIES) assert.deepEqual([b, sim(b).setpoint_w, sim(b).power_w], [b, 0, 0], `${b} released`);
        const at = (m: string) => Date.parse(String(d.lines.find((l) => l.msg === m)!.time));
        // For the docs (docs/operating.md): how long the stop took against the budget.
        console.log(`stop of 4 RTU batteries at 9600 baud: ${at("stopped") - at("stopping")} ms (budget ${STOP_BUDGET_MS} ms)`);
      } finally {
        await d.stop();
      }
    });
  });
});
