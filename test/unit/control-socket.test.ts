// The daemon's control socket on its own: it serves `dump DEVICE_ID` and nothing else, one
// dump at a time, refuses a malformed or oversized request with a clear answer, takes over a
// socket a dead daemon left, and never one a live daemon answers on. The dump itself is a
// fake here (the integration test dump-daemon.test.ts drives a real daemon and bus).
import { test } from "node:test";
import assert from "node:assert/strict";
import { createConnection, createServer } from "node:net";
import { lstatSync, statSync, writeFileSync } from "node:fs";
import { spawn } from "node:child_process";
import { ControlSocket, askDump, controlSocketPath } from "../../src/control-socket.js";
import { silentLogger } from "../../src/log.js";
import { SitegateError } from "../../src/errors.js";
import { CAPTURE_FORMAT, type Capture } from "../../src/modbus/device/capture.js";
import { withTmpDir } from "../support/tmp.js";

const capture: Capture = {
  format: CAPTURE_FORMAT,
  profile: "p",
  unit: 1,
  ranges: [{ unit: 1, table: "holding", address: 0, count: 1, words: [7], ms: 1 }],
};

function raw(path: string, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const c = createConnection(path, () => c.write(text));
    let buf = "";
    c.setEncoding("utf8");
    c.on("data", (d: string) => (buf += d));
    c.on("end", () => resolve(buf));
    c.on("error", reject);
  });
}

test("control socket: dump answers the capture; mode 0600; other ops, bad ids and long requests refused", async () => {
  await withTmpDir(async (dir) => {
    const asked: string[] = [];
    const s = new ControlSocket(
      dir,
      { dump: async (id) => (asked.push(id), id === "gone" ? Promise.reject(new SitegateError("DEVICE_NOT_FOUND", "no gone")) : capture) },
      silentLogger(),
    );
    await s.start();
    try {
      assert.equal(statSync(controlSocketPath(dir)).mode & 0o777, 0o600);
      assert.deepEqual(await askDump(controlSocketPath(dir), "bat-1", 5000), { ok: true, capture });
      assert.deepEqual(await askDump(controlSocketPath(dir), "gone", 5000), { ok: false, code: "DEVICE_NOT_FOUND", error: "no gone" });
      const op = JSON.parse(await raw(controlSocketPath(dir), '{"op":"write","device_id":"x"}\n'));
      assert.equal(op.code, "INVALID_REQUEST");
      assert.match(op.error, /only "dump"/);
      const id = JSON.parse(await raw(controlSocketPath(dir), '{"op":"dump","device_id":"../x y"}\n'));
      assert.equal(id.code, "INVALID_REQUEST");
      const long = JSON.parse(await raw(controlSocketPath(dir), "x".repeat(5000)));
      assert.equal(long.error, "request too long");
      assert.equal(JSON.parse(await raw(controlSocketPath(dir), "not json\n")).code, "INVALID_REQUEST");
      assert.deepEqual(asked, ["bat-1", "gone"], "only the well-formed dumps reached the daemon");
    } finally {
      await s.stop();
    }
  });
});

test("control socket: one dump at a time", async () => {
  await withTmpDir(async (dir) => {
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const s = new ControlSocket(dir, { dump: async () => (await held, capture) }, silentLogger());
    await s.start();
    try {
      const first = askDump(controlSocketPath(dir), "a", 5000);
      // the second asks while the first is held (driven from here, not by time)
      let second;
      for (;;) {
        second = await askDump(controlSocketPath(dir), "b", 5000);
        if (second && !second.ok && second.code === "BUSY") break;
      }
      assert.match(second.ok ? "" : second.error, /another dump is running/);
      release();
      assert.deepEqual(await first, { ok: true, capture });
    } finally {
      await s.stop();
    }
  });
});

test("control socket: takes over a socket a dead daemon left, refuses one a live daemon answers on, and a file in its place", async () => {
  await withTmpDir(async (dir) => {
    const path = controlSocketPath(dir);
    // a live listener on the path: another daemon
    const other = createServer((c) => c.end());
    await new Promise<void>((r) => other.listen(path, r));
    const s = new ControlSocket(dir, { dump: async () => capture }, silentLogger());
    await assert.rejects(s.start(), /another sitegate daemon answers/);
    await new Promise<void>((r) => other.close(() => r()));
    // the socket file a killed daemon leaves (a clean close unlinks it; SIGKILL does not)
    const dead = spawn(process.execPath, [
      "-e",
      `require("node:net").createServer().listen(${JSON.stringify(path)}, () => console.log("up"))`,
    ]);
    await new Promise<void>((r) => dead.stdout.once("data", () => r()));
    const gone = new Promise((r) => dead.once("exit", r));
    dead.kill("SIGKILL");
    await gone;
    assert.ok(lstatSync(path).isSocket(), "a socket file left behind");
    await s.start();
    try {
      assert.deepEqual(await askDump(path, "x", 5000), { ok: true, capture });
    } finally {
      await s.stop();
    }
  });
  await withTmpDir(async (dir) => {
    writeFileSync(controlSocketPath(dir), "not a socket");
    await assert.rejects(new ControlSocket(dir, { dump: async () => capture }, silentLogger()).start(), /is not a socket/);
  });
  await withTmpDir(async (dir) => {
    assert.equal(await askDump(controlSocketPath(dir), "x", 5000), null, "no daemon: null, the command dumps directly");
  });
});
