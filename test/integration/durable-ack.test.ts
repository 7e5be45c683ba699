// What the gateway acknowledges is on the disk before the acknowledgement leaves it: the
// daemon runs under strace, and between the commit of each configure, token, /dr receipt
// (the last write to sitegate.db-wal before the answer) and the answer's write on the
// caller's socket lies an fsync of sitegate.db-wal. `sitegate token revoke` likewise
// fsyncs before it prints "revoked". Telemetry is not covered: it has its loss window.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { request } from "node:https";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { withTmpDir } from "../support/tmp.js";
import { withSite, tcpScenario } from "../support/site.js";
import { TEST_API_KEY, TEST_PASSWORD } from "../support/config.js";
import { configurePath, tcpDevice } from "../support/gateway.js";
import { event } from "../support/dispatch.js";
import { testCert } from "../support/tls.js";
import { CLI, exited } from "../support/cli.js";
import { spawnDaemon } from "../support/daemon-process.js";
import { STRACE_FLAGS, acceptCall, answerWrite, mainThreadCalls, syncedBefore, wroteToFd } from "../support/strace.js";

const WAL = "/sitegate.db-wal";

interface Answer {
  what: string;
  status: number;
  body: string;
  /** The client's port: names the daemon's end of the connection in the trace. */
  port: number;
}

function call(base: string, what: string, method: string, path: string, headers: Record<string, string>, body: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(base + path, { method, headers: { ...headers, connection: "close" }, ca: testCert().cert, agent: false }, (res) => {
      let text = "";
      res.on("data", (b: Buffer) => (text += b.toString()));
      res.on("end", () => resolve({ what, status: res.statusCode ?? 0, body: text, port: req.socket!.localPort! }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

test("configure, token, /dr receipts and token revoke are fsynced before they are answered", async () => {
  assert.equal(spawnSync("strace", ["-V"]).status, 0, "strace is installed (make deps installs it)");
  await withSite(tcpScenario(), async (site) => {
    await withTmpDir(async (dir) => {
      // without the unit's node flags: strace follows a plain node
      const d = await spawnDaemon(dir, {}, { nodeArgs: [] });
      const { child, url: base, configFile: file } = d;
      const trace = join(dir, "daemon.trace");
      let tracer: ChildProcess | null = null;
      try {
        // Attached to the running daemon (every thread), so the test owns the daemon and can always end it.
        tracer = spawn("strace", [...STRACE_FLAGS, "-o", trace, "-p", String(child.pid)], { stdio: ["ignore", "ignore", "pipe"] });
        await new Promise<void>((resolve, reject) => {
          createInterface({ input: tracer!.stderr! }).on("line", (l) => /attached/.test(l) && resolve());
          tracer!.once("exit", (code) => reject(new Error(`strace exited with ${code}`)));
        });
        const answers: Answer[] = [];
        const form = new URLSearchParams({
          grant_type: "password",
          client_id: "partner-portal",
          username: "partner",
          password: TEST_PASSWORD,
        });
        const tok = await call(
          base,
          "token",
          "POST",
          "/connect/token",
          { "content-type": "application/x-www-form-urlencoded" },
          form.toString(),
        );
        answers.push(tok);
        const auth = { authorization: `Bearer ${JSON.parse(tok.body).access_token}`, "content-type": "application/json" };
        const port = site.tcpPorts[0];
        const ids = ["battery-1", "pv-1", "meter-1"];
        for (const [i, id] of ids.entries()) {
          const body = JSON.stringify({ devices: [tcpDevice(id, port, i + 1, "sunspec")] });
          answers.push(await call(base, `configure ${id}`, "PUT", configurePath(), auth, body));
        }
        const key = { "x-api-key": TEST_API_KEY, "content-type": "application/json" };
        for (let i = 0; i < 3; i++) {
          const body = JSON.stringify({ mode: "live", event_slots: [event({}, 60_000 + i * 10_000)] });
          answers.push(await call(base, `dr ${i}`, "POST", "/v1/api/gateway/site-001/dr", key, body));
        }
        for (const a of answers) assert.equal(a.status, 200, `${a.what}: ${a.body}`);

        const revokeTrace = join(dir, "revoke.trace");
        const revoke = spawnSync(
          "strace",
          [...STRACE_FLAGS, "-o", revokeTrace, process.execPath, CLI, "token", "revoke", "--all", "--config", file],
          {
            encoding: "utf8",
          },
        );
        assert.equal(revoke.status, 0, revoke.stderr);
        assert.match(revoke.stdout, /revoked 1 token/);

        await d.stop();
        await new Promise((r) => (tracer!.exitCode === null ? tracer!.once("exit", r) : r(null)));
        const calls = mainThreadCalls(trace, child.pid);
        for (const a of answers) {
          const accepted = acceptCall(calls, a.port);
          const answer = answerWrite(calls, a.port);
          assert.ok(accepted >= 0 && answer > accepted, `${a.what}: its connection (client port ${a.port}) and answer are in the trace`);
          const { lastWalWrite, synced } = syncedBefore(calls, answer, WAL);
          assert.ok(lastWalWrite > accepted, `${a.what}: committed to sitegate.db-wal while the request was open`);
          assert.ok(synced, `${a.what}: sitegate.db-wal fsynced between the commit and the answer`);
        }
        const cli = mainThreadCalls(revokeTrace);
        const printed = cli.findIndex((c) => wroteToFd(c, 1));
        assert.ok(printed >= 0, "token revoke printed its answer");
        const revoked = syncedBefore(cli, printed, WAL);
        assert.ok(revoked.lastWalWrite >= 0, "token revoke: committed to sitegate.db-wal before it printed");
        assert.ok(revoked.synced, "token revoke: sitegate.db-wal fsynced before it printed");
      } finally {
        child.kill("SIGKILL");
        tracer?.kill("SIGTERM");
        await exited(child);
      }
    });
  });
});
