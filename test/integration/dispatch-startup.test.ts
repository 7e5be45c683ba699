// The daemon as a child process, killed with -9 while a shed holds a relay open, then
// started again after the shed's end: the relay is put back before the API accepts a
// request. The restarted daemon stops at the test hook `ledger-put-back` (the put-back
// about to run): there the API must not be listening yet; once the test lets it go on,
// the first answer the API gives finds the coils in their pre-shed states.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { stringify } from "yaml";
import { Agent, request } from "undici";
import { withTmpDir } from "../support/tmp.js";
import { withSite } from "../support/site.js";
import { testConfigInput, TEST_API_KEY } from "../support/config.js";
import { event, rigConfig, siteScenario, startSink } from "../support/dispatch.js";
import { testCert } from "../support/tls.js";
import { until } from "../support/wait.js";
import { freePort } from "../support/net.js";

const CLI = resolve(fileURLToPath(import.meta.url), "../../../src/cli.js");

type Daemon = ChildProcess & { log: string[] };

/** The daemon, its last log lines kept for a failure's message. */
function startDaemon(configFile: string, env: Record<string, string> = {}): Daemon {
  const child = spawn(process.execPath, [CLI, "run", "--config", configFile], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, LOG_LEVEL: "info", ...env },
  }) as Daemon;
  child.log = [];
  const keep = (b: Buffer) => {
    child.log.push(...b.toString().split("\n").filter(Boolean));
    child.log.splice(0, Math.max(0, child.log.length - 40));
  };
  child.stdout!.on("data", keep);
  child.stderr!.on("data", keep);
  return child;
}

/** A /dr POST; status 0 when the API does not accept the connection. */
async function post(port: number, body: unknown): Promise<number> {
  const agent = new Agent({ connect: { ca: testCert().cert } });
  try {
    const r = await request(`https://127.0.0.1:${port}/v1/api/gateway/site-001/dr`, {
      method: "POST",
      body: JSON.stringify(body),
      headers: { "content-type": "application/json", "x-api-key": TEST_API_KEY },
      dispatcher: agent,
    });
    await r.body.dump();
    return r.statusCode;
  } catch {
    return 0;
  } finally {
    await agent.close();
  }
}

async function paired(port: number): Promise<number> {
  const agent = new Agent({ connect: { ca: testCert().cert } });
  try {
    const r = await request(`https://127.0.0.1:${port}/v1/api/gateway/site-001/devicesync`, {
      headers: { "x-api-key": TEST_API_KEY },
      dispatcher: agent,
    });
    return ((await r.body.json()) as { devices: unknown[] }).devices.length;
  } finally {
    await agent.close();
  }
}

const exited = (c: ChildProcess) => new Promise((r) => (c.exitCode !== null || c.signalCode !== null ? r(null) : c.once("exit", r)));

test("after kill -9 during a shed, the restarted daemon puts the relay back before its API accepts a request", async () => {
  const sink = await startSink();
  try {
    await withSite(siteScenario(), async (site) => {
      await withTmpDir(async (dir) => {
        const port = await freePort();
        const file = join(dir, "config.yaml");
        const cfg = {
          ...testConfigInput(join(dir, "data")),
          log_level: "warn",
          http: { listen: `127.0.0.1:${port}`, tls: { cert: testCert().certFile, key: testCert().keyFile } },
          ...rigConfig(site, sink),
        };
        writeFileSync(file, stringify(cfg));
        const coils = () => site.state().devices.relay.coils as boolean[];
        const PRE = [true, true, true, false];
        const empty = { mode: "live", event_slots: [] };

        let child = startDaemon(file);
        const log = () => child.log.join("\n");
        try {
          await until(async () => (await post(port, empty)) === 400, "daemon up", 45_000);
          await until(async () => (await paired(port)) === 4, "devices paired", 45_000);
          site.device("relay").set({ coils: PRE });
          const shed = event({ event_type: "shed", event_quantity: 0.5, event_unit: "kW", priority: 20 }, 1500, 4000);
          assert.equal(await post(port, { mode: "live", event_slots: [shed] }), 200);
          await until(() => coils().every((c) => !c), "relay open", 20_000);
          child.kill("SIGKILL");
          await exited(child);
          await until(() => Date.now() > Date.parse(shed.end_time) + 500, "past the shed's end_time", 20_000);
          assert.deepEqual(coils(), [false, false, false, false], `left open by the crashed run\n${log()}`);

          const fifo = join(dir, "resume");
          const hook = join(dir, "hook");
          assert.equal(spawnSync("mkfifo", [fifo]).status, 0);
          child = startDaemon(file, {
            SITEGATE_TEST_HOOKS: "1",
            SITEGATE_TEST_HOOK_AT: "ledger-put-back",
            SITEGATE_TEST_HOOK_FILE: hook,
            SITEGATE_TEST_HOOK_RESUME: fifo,
          });
          let answered = false;
          await until(
            async () => existsSync(hook) || (answered = (await post(port, empty)) === 400),
            "the put-back reached, or the API answering",
            45_000,
          );
          assert.equal(
            answered,
            false,
            `the API answered before the put-back of the relay was done or reached (coils then: ${JSON.stringify(coils())})\n${log()}`,
          );
          assert.equal(readFileSync(hook, "utf8").trim(), "ledger-put-back");
          // The daemon waits at the put-back: its API must not accept a connection.
          assert.equal(await post(port, empty), 0, `the API accepts nothing before the put-back\n${log()}`);
          assert.deepEqual(coils(), [false, false, false, false], `the relay untouched before the put-back\n${log()}`);
          writeFileSync(fifo, "go\n");
          await until(async () => (await post(port, empty)) === 400, "the API up after the put-back", 45_000);
          assert.deepEqual(coils(), PRE, `the first answer finds the coils put back\n${log()}`);
        } finally {
          child.kill("SIGKILL");
          await exited(child);
        }
      });
    });
  } finally {
    await sink.stop();
  }
});
