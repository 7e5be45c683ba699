// `make run` (dist/test/support/demo.js) on free ports and its own folder, so it never meets
// a developer's running demo: the whole dispatch story as a person reads it, the devices
// put back afterwards, Ctrl-C exiting 0; and a taken port named with its variable.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { createServer } from "node:net";
import { statSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { freePort } from "../support/net.js";
import { withTmpDir } from "../support/tmp.js";

const DEMO = resolve(fileURLToPath(import.meta.url), "../../support/demo.js");
const ROOT = resolve(fileURLToPath(import.meta.url), "../../../..");

async function demoEnv(dir: string): Promise<NodeJS.ProcessEnv> {
  const env: NodeJS.ProcessEnv = { ...process.env, SITEGATE_DEMO_DIR: dir, SITEGATE_DEMO_LONGITUDE: "15" };
  for (const v of ["SITEGATE_DEMO_PORT", "SITEGATE_DEMO_SINK_PORT", "SITEGATE_DEMO_SIM_PORT", "SITEGATE_DEMO_MODBUS_PORT"])
    env[v] = String(await freePort());
  return env;
}

test("make run tells the dispatch story: receipts, execution responses at the sink, devices put back; Ctrl-C exits 0", () =>
  withTmpDir(async (dir) => {
    const env = await demoEnv(dir);
    const child = spawn(process.execPath, [DEMO], { env, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => (out += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (err += d));
    const exited = new Promise<number | null>((r) => child.once("exit", (c) => r(c)));
    try {
      // A bound, not a measurement: under make test's --test-timeout (120 s), so that a stalled
      // story fails here with its output and the finally below still stops the demo.
      let bound: NodeJS.Timeout | undefined;
      await new Promise<void>((resolveDone, reject) => {
        bound = setTimeout(() => reject(new Error(`no end of the story within 110 s:\n${out}\n${err}`)), 110_000);
        // the story, then the commands to try next (the block's last line ends with /dr)
        const check = () => {
          if (/the dispatch story is done[\s\S]*try next[\s\S]*\/dr\n/.test(out)) resolveDone();
        };
        child.stdout.on("data", check);
        void exited.then((c) => reject(new Error(`demo exited (${c}) before the story ended:\n${out}\n${err}`)));
      }).finally(() => clearTimeout(bound));
      // The header carries every address.
      for (const v of ["SITEGATE_DEMO_PORT", "SITEGATE_DEMO_SINK_PORT", "SITEGATE_DEMO_SIM_PORT"])
        assert.match(out, new RegExp(`127\\.0\\.0\\.1:${env[v]}`), `${v} in the header`);
      assert.match(out, /paired battery: SimEnergy SimStore \S+ ST/);
      const receipts = out.match(/<- receipt 200 \[\{"event_id":"[0-9a-f-]{36}","status":"accepted"\}\]/g) ?? [];
      assert.equal(receipts.length, 3, out);
      for (const type of ["discharge 3 kW", "shed 1.5 kW", "restore 1.5 kW"]) assert.ok(out.includes(`dr  ${type}`), type);
      const responses = out.match(/<- at the sink: execution response [0-9a-f-]{36}: completed/g) ?? [];
      assert.equal(responses.length, 3, out);
      assert.match(out, /ended by restore/);
      assert.match(out, /relay coils off off off off/);
      // kW with three significant digits, codes with names.
      assert.match(out, /battery\s+3\.00 kW|battery 3\.00 kW/);
      assert.doesNotMatch(out, /state=\d/);
      // The simulator as the story leaves it: the battery released to its own control, the coils closed.
      const st = (await (await fetch(`http://127.0.0.1:${env.SITEGATE_DEMO_SIM_PORT}/state`)).json()) as any;
      assert.deepEqual(st.devices.relay.coils, [true, true, true, true]);
      assert.equal(st.devices.battery.setpoint_w, 0, "no command left on the battery");
      assert.equal(st.devices.battery.power_w, 0);
      assert.equal(statSync(join(dir, "config.yaml")).mode & 0o777, 0o600);
      // its certificate in its own folder, readable by its user only
      assert.equal(statSync(join(dir, "tls")).mode & 0o777, 0o700);
      await tryTheNextCommands(out, env);
      assert.doesNotMatch(out + err, /secrets readable by other users/);
    } finally {
      child.kill("SIGINT");
    }
    assert.equal(await exited, 0, `${out}\n${err}`);
    assert.match(out, /stopped cleanly/);
  }));

/** Runs the two commands the demo printed, as a person copies them, from the clone. */
async function tryTheNextCommands(out: string, env: NodeJS.ProcessEnv): Promise<void> {
  const lines = out.slice(out.indexOf("try next, in another terminal in ")).split("\n");
  assert.equal(lines[0], `try next, in another terminal in ${ROOT}, while this runs:`);
  const events = lines[1] ?? "";
  assert.match(events, /^ {2}bin\/sitegate events --config \S+config\.yaml$/);
  const curl = lines.slice(2, lines.findIndex((l) => l.endsWith(`/v1/api/gateway/site-001/dr`)) + 1).join("\n");
  assert.match(
    curl,
    new RegExp(`^ {2}curl --cacert \\S+cert\\.pem -H 'X-API-Key: demo-api-key'[\\s\\S]*https://127\\.0\\.0\\.1:${env.SITEGATE_DEMO_PORT}/`),
  );
  const shell = (cmd: string) => spawnSync("bash", ["-c", cmd], { cwd: ROOT, encoding: "utf8", env: { ...env, PATH: "/usr/bin:/bin" } });
  const posted = shell(curl);
  assert.equal(posted.status, 0, posted.stderr);
  const receipt = JSON.parse(posted.stdout) as Array<{ event_id: string; status: string }>;
  assert.equal(receipt[0]?.status, "accepted", posted.stdout);
  const listed = shell(events);
  assert.equal(listed.status, 0, listed.stderr);
  assert.ok(listed.stdout.includes(receipt[0].event_id), `the new discharge in sitegate events:\n${listed.stdout}`);
}

test("make run with the API port taken names the port and its variable, starts nothing and exits 1", () =>
  withTmpDir(async (dir) => {
    const env = await demoEnv(dir);
    const holder = createServer();
    await new Promise<void>((r) => holder.listen(Number(env.SITEGATE_DEMO_PORT), "127.0.0.1", () => r()));
    try {
      const r = spawnSync(process.execPath, [DEMO], { env, encoding: "utf8", timeout: 60_000 });
      assert.equal(r.status, 1, r.stdout + r.stderr);
      assert.match(r.stderr, new RegExp(`port ${env.SITEGATE_DEMO_PORT} \\(gateway API and status page\\) is in use.*SITEGATE_DEMO_PORT`));
      assert.doesNotMatch(r.stdout, /sitegate demo/, "nothing started");
    } finally {
      holder.close();
    }
  }));

test("a gateway that cannot start: the demo shows why (the gateway's own error) and exits 1", () =>
  withTmpDir(async (dir) => {
    // An unknown log level reaches only the gateway (the demo gives the simulator its own), which refuses to start.
    const env = { ...(await demoEnv(dir)), LOG_LEVEL: "bogus" };
    const r = spawnSync(process.execPath, [DEMO], { env, encoding: "utf8", timeout: 100_000 });
    assert.equal(r.status, 1, r.stdout + r.stderr);
    assert.match(r.stderr, /make run failed: the gateway exited \(1\)/);
    assert.match(r.stderr, /the gateway's last warnings and errors:\n.*level:bogus/);
  }));
