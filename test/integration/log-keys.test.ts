// No log line repeats a key: `"part":"uplink",…,"part":0` or `bus` twice made `jq` read the
// last one only. The daemon runs with Modbus devices over TCP, a device on an RTU port that
// does not exist (the bus's reconnect warnings) and a partner that refuses every push (the
// delivery lanes' retry warnings); every JSON line it logs is parsed with a parser that
// notices repeated keys (spawnDaemon's stop() checks them, here and in every test that
// runs the daemon through it). The event bus's listener failures are checked in process.
import { test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { Writable } from "node:stream";
import { withSite, tcpScenario } from "../support/site.js";
import { withTmpDir } from "../support/tmp.js";
import { spawnDaemon } from "../support/daemon-process.js";
import { rtuDevice, tcpDevice } from "../support/gateway.js";
import { until } from "../support/wait.js";
import { repeatedKeys } from "../support/log-keys.js";
import { createLogger } from "../../src/log.js";
import { EventBus } from "../../src/event-bus.js";

test("repeatedKeys finds a key twice in one object, at any depth, and nothing else", () => {
  assert.deepEqual(repeatedKeys('{"part":"uplink","a":1,"part":0}'), ["part"]);
  assert.deepEqual(repeatedKeys('{"a":{"bus":"x","bus":"y"},"b":[{"c":1,"c":2}]}'), ["a.bus", "b[0].c"]);
  assert.deepEqual(repeatedKeys('{"a":{"k":1},"b":{"k":"\\"}"},"s":"part","t":[1,"x",null,true]}'), []);
});

test("the daemon's log lines repeat no key: buses that cannot connect, pushes that are refused", async () => {
  await withSite(tcpScenario(), async (site) => {
    await withTmpDir(async (dir) => {
      const port = site.tcpPorts[0];
      const d = await spawnDaemon(dir, {
        rtu_ports: { "1": join(dir, "ttyNONE") },
        telemetry: { poll_interval_ms: 250, retention_max_mb: 64, commit_interval_s: 1 },
        devices: [
          tcpDevice("battery", port, 1, "sunspec", { mb_device_type: 3 }),
          tcpDevice("grid", port, 3, "sunspec", { mb_device_type: 1 }),
          rtuDevice("sdm", 10, "sdm630", { mb_device_type: 1 }),
        ] as never,
      });
      try {
        const seen = (msg: string) => d.lines.some((l) => l.msg === msg);
        await until(() => seen("cannot connect") && seen("message not accepted; will retry"), "a bus and a lane warning", 30_000);
      } finally {
        await d.stop(); // fails on a repeated key
      }
      assert.ok(d.lines.length > 10, `${d.lines.length} lines checked`);
    });
  });
});

test("an event listener's failure names its part once", () => {
  const out: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      out.push(...chunk.toString().split("\n").filter(Boolean));
      done();
    },
  });
  const log = createLogger({ level: "info", pretty: false, destination: sink, journal: false });
  const bus = new EventBus<{ tick: [] }>(log.child({ part: "events" }));
  bus.on("tick", "samples", () => {
    throw new Error("boom");
  });
  bus.emitter("tick")();
  assert.ok(out.length > 0, "the failure is logged");
  for (const l of out) assert.deepEqual(repeatedKeys(l), [], l);
});
