// The daemon as a child process: kill -9 mid-event and a restart resume the event and
// send exactly one execution response; an event that ended while the daemon was down is
// reported missed and never run; `sitegate events` lists both from the database.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { setTimeout as sleep } from "node:timers/promises";
import { stringify } from "yaml";
import { withTmpDir } from "../support/tmp.js";
import { withSite, type SimHandle } from "../support/site.js";
import { testConfigInput, TEST_API_KEY } from "../support/config.js";
import { POLL_MS, assertMeasuredDelivery, event, rigConfig, siteScenario, startSink } from "../support/dispatch.js";
import type { PartnerSink } from "../support/partner-sink.js";
import { testCert } from "../support/tls.js";
import { until } from "../support/wait.js";
import { Agent, request } from "undici";
import { freePort } from "../support/net.js";

const CLI = resolve(fileURLToPath(import.meta.url), "../../../src/cli.js");

function startDaemon(configFile: string): ChildProcess {
  return spawn(process.execPath, [CLI, "run", "--config", configFile], { stdio: "ignore", env: { ...process.env, LOG_LEVEL: "warn" } });
}

async function post(port: number, body: unknown): Promise<{ status: number; json: any }> {
  const agent = new Agent({ connect: { ca: testCert().cert } });
  try {
    const r = await request(`https://127.0.0.1:${port}/v1/api/gateway/site-001/dr`, {
      method: "POST",
      body: JSON.stringify(body),
      headers: { "content-type": "application/json", "x-api-key": TEST_API_KEY },
      dispatcher: agent,
    });
    return { status: r.statusCode, json: await r.body.json() };
  } finally {
    await agent.close();
  }
}

async function devicesync(port: number): Promise<unknown[]> {
  const agent = new Agent({ connect: { ca: testCert().cert } });
  try {
    const r = await request(`https://127.0.0.1:${port}/v1/api/gateway/site-001/devicesync`, {
      headers: { "x-api-key": TEST_API_KEY },
      dispatcher: agent,
    });
    return ((await r.body.json()) as { devices: unknown[] }).devices;
  } finally {
    await agent.close();
  }
}

/** A simulated site, a partner sink, and the config file of a daemon to run as a child process. */
async function withDaemonSite(
  fn: (rig: { site: SimHandle; sink: PartnerSink; port: number; file: string }) => Promise<void>,
): Promise<void> {
  const sink = await startSink();
  try {
    await withSite(siteScenario(), async (site) => {
      await withTmpDir(async (dir) => {
        const port = await freePort();
        const cfg = {
          ...testConfigInput(join(dir, "data")),
          log_level: "warn",
          http: { listen: `127.0.0.1:${port}`, tls: { cert: testCert().certFile, key: testCert().keyFile } },
          ...rigConfig(site, sink),
        };
        const file = join(dir, "config.yaml");
        writeFileSync(file, stringify(cfg));
        await fn({ site, sink, port, file });
      });
    });
  } finally {
    await sink.stop();
  }
}

test("kill -9 mid-event: the restarted daemon resumes it and sends exactly one execution response; a missed event is reported missed", async () => {
  await withDaemonSite(async ({ site, sink, port, file }) => {
    let child = startDaemon(file);
    try {
      await until(
        async () => (await post(port, { mode: "live", event_slots: [] }).catch(() => ({ status: 0 }))).status === 400,
        "daemon up",
        45_000,
      );
      await until(async () => (await devicesync(port)).length === 4, "devices paired", 45_000);
      const running = event({ event_type: "discharge", event_quantity: 2, event_unit: "kW" }, 2500, 14_000);
      assert.equal((await post(port, { mode: "live", event_slots: [running] })).status, 200);
      await until(() => Math.abs((site.state().devices.battery.power_w as number) - 2000) < 100, "event running", 20_000);
      child.kill("SIGKILL");
      await new Promise((r) => child.once("exit", r));
      child = startDaemon(file);
      // The battery keeps its setpoint (revert timeout 60 s); the restarted daemon takes the event up again.
      const body = await until(
        () => sink.accepted("/exec").some((r) => r.body.event_id === running.event_id),
        "execution response after the restart",
        30_000,
      ).then(() => sink.accepted("/exec").find((r) => r.body.event_id === running.event_id)!.body as any);
      // The restart gap counts what the battery reads back once the daemon is up again (it
      // held its setpoint: delivered), and the response lists the gap (B4).
      assertMeasuredDelivery(body, 2);
      assert.equal(body.details.devices.length, 1);
      assert.equal(body.details.gaps?.length, 1, JSON.stringify(body.details));
      assert.ok(Date.parse(body.details.gaps[0].to) > Date.parse(body.details.gaps[0].from), JSON.stringify(body.details.gaps));
      await until(() => site.state().devices.battery.power_w === 0, "released at the end");
      // "Exactly one" is a claim about nothing more happening: give a duplicate the time the
      // outbox would take to send one (it sends at once when the sink accepts).
      await sleep(1500);
      const keys = new Set(
        sink.requests
          .filter((r) => r.path === "/exec" && (r.body as any).event_id === running.event_id)
          .map((r) => r.headers["idempotency-key"]),
      );
      assert.equal(sink.accepted("/exec").filter((r) => r.body.event_id === running.event_id).length, 1, "exactly one execution response");
      assert.equal(keys.size, 1);

      // Stopped before an event and started after its end: missed, never run.
      const missed = event({ event_type: "charge", event_quantity: 1, event_unit: "kW" }, 1500, 1500);
      assert.equal((await post(port, { mode: "live", event_slots: [missed] })).status, 200);
      child.kill("SIGTERM");
      await new Promise((r) => child.once("exit", r));
      const writesBefore = (site.state().devices.battery.writes as unknown[]).length;
      // The event must end while the gateway is down: wait out its end_time (wall clock).
      await sleep(Math.max(0, Date.parse(missed.end_time as string) - Date.now()) + 200);
      child = startDaemon(file);
      await until(() => sink.accepted("/exec").some((r) => r.body.event_id === missed.event_id), "missed response", 20_000);
      const mb = sink.accepted("/exec").find((r) => r.body.event_id === missed.event_id)!.body as any;
      assert.equal(mb.status, "failed");
      assert.equal(mb.details.reason, "missed");
      assert.equal((site.state().devices.battery.writes as unknown[]).length, writesBefore, "the missed event wrote nothing");

      const ev = spawnSync(process.execPath, [CLI, "events", "--config", file, "--json"], { encoding: "utf8" });
      assert.equal(ev.status, 0, ev.stderr);
      const list = JSON.parse(ev.stdout) as Array<{ event_id: string; state: string; result: string | null; source: string }>;
      assert.equal(list.find((e) => e.event_id === running.event_id)?.state, "done");
      assert.equal(list.find((e) => e.event_id === missed.event_id)?.state, "missed");
      const table = spawnSync(process.execPath, [CLI, "events", "--config", file], { encoding: "utf8" });
      assert.match(table.stdout, /missed\s+failed/);
    } finally {
      child.kill("SIGKILL");
    }
  });
});

test("a shed running at kill -9, restarted after its end: the coils are back to their pre-shed states at once (an off coil stays off); the same after a clean stop", async () => {
  await withDaemonSite(async ({ site, sink, port, file }) => {
    const coils = () => site.state().devices.relay.coils as boolean[];
    const up = () =>
      until(
        async () => (await post(port, { mode: "live", event_slots: [] }).catch(() => ({ status: 0 }))).status === 400,
        "daemon up",
        45_000,
      );
    const PRE = [true, true, true, false];
    let child = startDaemon(file);
    try {
      await up();
      await until(async () => (await devicesync(port)).length === 4, "devices paired", 45_000);
      site.device("relay").set({ coils: PRE });
      for (const signal of ["SIGKILL", "SIGTERM"] as const) {
        const shed = event({ event_type: "shed", event_quantity: 0.5, event_unit: "kW", priority: 20 }, 1500, 5000);
        assert.equal((await post(port, { mode: "live", event_slots: [shed] })).status, 200);
        await until(() => coils().every((c) => !c), `relay open (${signal})`, 20_000);
        child.kill(signal);
        await new Promise((r) => child.once("exit", r));
        if (signal === "SIGKILL")
          assert.deepEqual(coils(), [false, false, false, false], "nothing released them while the gateway was down");
        else assert.deepEqual(coils(), PRE, "a clean stop puts the coils back at once");
        await until(() => Date.now() > Date.parse(shed.end_time) + 500, "past end_time", 20_000);
        child = startDaemon(file);
        await up();
        // Released from the ledger when dispatch starts, before the API answers: within one poll interval at most.
        await until(() => JSON.stringify(coils()) === JSON.stringify(PRE), `coils back to their pre-shed states after ${signal}`, POLL_MS);
        await until(
          () => sink.accepted("/exec").some((r) => r.body.event_id === shed.event_id),
          `execution response after ${signal}`,
          20_000,
        );
        const body = sink.accepted("/exec").find((r) => r.body.event_id === shed.event_id)!.body as any;
        assert.notEqual(body.details.reason, "missed", "it ran: reported, not missed");
        assert.deepEqual(coils(), PRE, "the fourth coil stays off");
      }
    } finally {
      child.kill("SIGKILL");
    }
  });
});
