// Issue 42 item 7: a Modbus TCP connection that recovers from a slow start. On a loaded
// machine a connect can take longer than the connect timeout ("TCP Connection Timed Out")
// and complete afterwards; and a device can be slow with its first answers after a connect
// (the simulator's `late_first`, DESIGN B7). Real sockets: the simulator, and a front
// (test/support/slow-accept.py) whose full accept queue makes the kernel drop the
// gateway's SYN until the test lets connections through.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { join } from "node:path";
import { withSite, tcpScenario } from "../support/site.js";
import { brandsOnTcp } from "../support/brands.js";
import { until } from "../support/wait.js";
import { Bus } from "../../src/modbus/bus.js";
import { ModbusSerialTransport } from "../../src/modbus/transport.js";
import { DeviceDriver } from "../../src/modbus/device/driver.js";
import { builtinProfiles } from "../../src/profiles/registry.js";
import { silentLogger } from "../../src/log.js";
import { isSitegateError } from "../../src/errors.js";

const ROOT = join(import.meta.dirname, "../../..");

/** The slow-accept front for `target`: its port, and `go()` to let connections through. */
async function slowFront(target: number): Promise<{ port: number; go: () => void; stop: () => void }> {
  const p = spawn("/usr/bin/python3", [join(ROOT, "test/support/slow-accept.py"), String(target)], { stdio: ["pipe", "pipe", "inherit"] });
  const [line] = (await once(p.stdout, "data")) as [Buffer];
  const port = Number(line.toString().trim());
  assert.ok(port > 0, `slow-accept front started: ${line.toString()}`);
  return { port, go: () => p.stdin.write("go\n"), stop: () => p.kill() };
}

test("a connect that timed out and completed later does not leave a deaf connection: the late-answering device pairs", async () => {
  await withSite(tcpScenario(), async (site) => {
    // The battery's first answer after each connect is 2.5 s late: past the profile's 1 s.
    site.setFault({ device: "battery", fault: "late_first", delay_ms: 2500 });
    const front = await slowFront(site.tcpPorts[0]!);
    const transports: ModbusSerialTransport[] = [];
    const bus = new Bus({ kind: "tcp", host: "127.0.0.1", port: front.port }, silentLogger(), (e) => {
      const t = new ModbusSerialTransport(e, 400);
      transports.push(t);
      return t;
    });
    try {
      const d = new DeviceDriver(bus, 1, builtinProfiles().get("sunspec"));
      // The SYN is dropped while the queue is full: the connect times out.
      await assert.rejects(d.pair(), (e) => isSitegateError(e) && e.code === "MODBUS_DISCONNECTED" && /Timed Out/i.test(e.message));
      // Now connections get through: the gateway's retried SYN (its socket from the timed-out
      // connect) and any new one. Old code kept the first and never heard its answers.
      front.go();
      let lastErr = "";
      await until(
        async () => {
          try {
            return (await d.pair()).device_type === 10;
          } catch (e) {
            lastErr = (e as Error).message;
            return false;
          }
        },
        "the device pairs once it answers",
        40_000,
      ).catch((e: Error) => assert.fail(`${e.message}; last error: ${lastErr}`));
      // Believe the device: its power as the simulator has it.
      const m = await d.read(["fast"]);
      const sim = site.state().devices.battery!.power_w as number;
      assert.ok(Math.abs(m.power_w! - sim) <= Math.max(2, Math.abs(sim) * 0.02), `power ${m.power_w} vs simulator ${sim}`);
    } finally {
      await bus.close();
      front.stop();
    }
  });
});

test("after a timeout, the late answer to the earlier request is discarded by transaction id and the next read gets its own", async () => {
  await withSite(tcpScenario(), async (site) => {
    site.setFault({ device: "grid", fault: "late_first", delay_ms: 1500 });
    const bus = new Bus({ kind: "tcp", host: "127.0.0.1", port: site.tcpPorts[0]! }, silentLogger());
    try {
      // 40000 holds "Su" (0x5375), 40001 "nS" (0x6e53): a stale answer would show the first.
      // 1.5 s late cannot come within 0.3 s whatever the load.
      await assert.rejects(
        bus.read(3, "holding", 40000, 1, { timeoutMs: 300, retries: 0 }),
        (e) => isSitegateError(e) && e.code === "MODBUS_TIMEOUT",
      );
      const t = bus.transport as ModbusSerialTransport;
      // The simulator answers in order: the late answer comes before this one's, while it waits.
      assert.deepEqual(
        await bus.read(3, "holding", 40001, 1, { timeoutMs: 20_000, retries: 0 }),
        [0x6e53],
        "its own answer, not the stale one",
      );
      assert.equal(t.staleAnswers, 1, "the late answer arrived on the same connection and was discarded");
      assert.equal(t.dropped, 0, "one late answer is no reason to reconnect");
      assert.deepEqual(await bus.read(3, "holding", 40000, 2, { timeoutMs: 20_000 }), [0x5375, 0x6e53]);
    } finally {
      await bus.close();
    }
  });
});

test("a Huawei whose first answer after a connect is 4 s late pairs at the first attempt (its profile allows the sources' 10 s)", async () => {
  await withSite(brandsOnTcp(), async (site) => {
    // 4 s: past the 2 s the profile allowed before, well within the 10 s the sources allow.
    site.setFault({ device: "huawei", fault: "late_first", delay_ms: 4000 });
    const bus = new Bus({ kind: "tcp", host: "127.0.0.1", port: site.tcpPorts[0]! }, silentLogger());
    try {
      const d = new DeviceDriver(bus, 2, builtinProfiles().get("huawei-sun2000"));
      const desc = await d.pair();
      assert.equal(desc.device_type, 10);
      assert.equal(bus.stats.timeouts, 0, "no request went unanswered");
      const m = await d.read(["fast"]);
      const sim = site.state().devices.huawei!.power_w as number;
      assert.ok(Math.abs(m.power_w! - sim) <= Math.max(2, Math.abs(sim) * 0.02), `power ${m.power_w} vs simulator ${sim}`);
    } finally {
      await bus.close();
    }
  });
});

test("three unanswered requests in a row on one connection drop it; the next request opens a fresh one", async () => {
  await withSite(tcpScenario(), async (site) => {
    site.setFault({ device: "grid", fault: "no_answer" });
    const bus = new Bus({ kind: "tcp", host: "127.0.0.1", port: site.tcpPorts[0]! }, silentLogger());
    try {
      const first = bus.transport as ModbusSerialTransport;
      for (let i = 0; i < 3; i++)
        await assert.rejects(
          bus.read(3, "holding", 40000, 1, { timeoutMs: 200, retries: 0 }),
          (e) => isSitegateError(e) && e.code === "MODBUS_TIMEOUT",
        );
      assert.equal(first.dropped, 1, "dropped after the third");
      assert.equal(first.isOpen, false);
      site.clearFaults("grid");
      assert.deepEqual(await bus.read(3, "holding", 40000, 1, { timeoutMs: 20_000 }), [0x5375]);
      assert.equal(bus.stats.reconnects, 2, "the first connection and the fresh one");
    } finally {
      await bus.close();
    }
  });
});
