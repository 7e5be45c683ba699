// The bus queue with a scripted transport (pure scheduling logic; the real transports are
// tested against the simulator in test/integration).
import { test } from "node:test";
import assert from "node:assert/strict";
import { Bus, PRIORITY } from "../../src/modbus/bus.js";
import type { Transport } from "../../src/modbus/transport.js";
import { SitegateError } from "../../src/errors.js";
import { silentLogger } from "../../src/log.js";

class ScriptedTransport implements Transport {
  isOpen = false;
  log: string[] = [];
  opens = 0;
  fail: Array<SitegateError | null> = [];
  delayMs = 5;
  async open() {
    this.opens++;
    this.isOpen = true;
  }
  async close() {
    this.isOpen = false;
  }
  private async step(what: string) {
    this.log.push(what);
    await new Promise((r) => setTimeout(r, this.delayMs)); // the scripted device's answer time, not a wait
    const f = this.fail.shift();
    if (f) throw f;
  }
  async read(unit: number, _t: string, address: number, count: number) {
    await this.step(`r${unit}@${address}`);
    return new Array(count).fill(unit);
  }
  async writeRegisters(unit: number, address: number) {
    await this.step(`w${unit}@${address}`);
  }
  async writeCoils(unit: number, address: number) {
    await this.step(`c${unit}@${address}`);
  }
}

const tcp = { kind: "tcp" as const, host: "127.0.0.1", port: 1 };

test("requests run one at a time, control writes before pairing before polls", async () => {
  const t = new ScriptedTransport();
  const bus = new Bus(tcp, silentLogger(), t);
  const first = bus.read(1, "holding", 0, 1); // starts at once
  const polls = [bus.read(1, "holding", 10, 1), bus.read(2, "holding", 20, 1)];
  const pairing = bus.read(3, "holding", 30, 1, { priority: PRIORITY.pairing });
  const control = bus.writeRegisters(4, 40, [1]);
  await Promise.all([first, ...polls, pairing, control]);
  assert.deepEqual(t.log, ["r1@0", "w4@40", "r3@30", "r1@10", "r2@20"]);
  await bus.close();
});

test("scan probes go after every poll: a scan keeps the bus only while no poll waits", async () => {
  const t = new ScriptedTransport();
  const bus = new Bus(tcp, silentLogger(), t);
  const first = bus.read(1, "holding", 0, 1); // starts at once
  // A scan probes one id at a time; a poll that arrives meanwhile goes before its next probe.
  const scan = (async () => {
    for (const unit of [20, 21, 22]) await bus.read(unit, "holding", 0, 1, { priority: PRIORITY.scan, retries: 0 });
  })();
  const polls = [bus.read(1, "holding", 10, 1), bus.read(2, "holding", 20, 1)];
  await Promise.all([first, scan, ...polls]);
  assert.deepEqual(t.log, ["r1@0", "r1@10", "r2@20", "r20@0", "r21@0", "r22@0"]);
  t.log.length = 0;
  // A poll queued while a probe is on the wire runs next, before the scan's next probe.
  const scan2 = (async () => {
    for (const unit of [30, 31]) await bus.read(unit, "holding", 0, 1, { priority: PRIORITY.scan, retries: 0 });
  })();
  await new Promise((r) => setImmediate(r));
  const poll = bus.read(1, "holding", 10, 1);
  await Promise.all([scan2, poll]);
  assert.deepEqual(t.log, ["r30@0", "r1@10", "r31@0"]);
  await bus.close();
});

test("a timeout is not retried; a transient error is retried once; writes are never retried", async () => {
  const t = new ScriptedTransport();
  const bus = new Bus(tcp, silentLogger(), t);
  t.fail = [new SitegateError("MODBUS_TIMEOUT", "t", { transient: true })];
  await assert.rejects(bus.read(1, "holding", 0, 1), (e) => (e as SitegateError).code === "MODBUS_TIMEOUT");
  assert.equal(t.log.length, 1);
  t.fail = [new SitegateError("MODBUS_CRC", "crc", { transient: true })];
  assert.deepEqual(await bus.read(1, "holding", 0, 1), [1]);
  assert.equal(t.log.length, 3);
  t.fail = [new SitegateError("MODBUS_CRC", "crc", { transient: true })];
  await assert.rejects(bus.writeRegisters(1, 5, [1]), (e) => (e as SitegateError).code === "MODBUS_CRC");
  assert.equal(t.log.length, 4);
  await bus.close();
});

test("a lost connection is reopened on the next request", async () => {
  const t = new ScriptedTransport();
  const bus = new Bus(tcp, silentLogger(), t);
  await bus.read(1, "holding", 0, 1);
  t.isOpen = false; // the peer went away
  await bus.read(1, "holding", 0, 1);
  assert.equal(t.opens, 2);
  await bus.close();
});

test("per-device delay spaces requests to a slow device without holding up the others", async () => {
  const t = new ScriptedTransport();
  t.delayMs = 1;
  const bus = new Bus(tcp, silentLogger(), t);
  bus.setDeviceDelay(1, 60);
  await bus.read(1, "holding", 0, 1);
  const slow = bus.read(1, "holding", 1, 1);
  const fast = bus.read(2, "holding", 2, 1);
  await Promise.all([slow, fast]);
  assert.deepEqual(t.log, ["r1@0", "r2@2", "r1@1"], "unit 2 went while unit 1 had to wait");
  await bus.close();
});

test("closing the bus rejects what is queued", async () => {
  const t = new ScriptedTransport();
  t.delayMs = 30;
  const bus = new Bus(tcp, silentLogger(), t);
  const a = bus.read(1, "holding", 0, 1);
  const b = assert.rejects(bus.read(1, "holding", 1, 1), /closed/);
  const closing = bus.close();
  assert.deepEqual(await a, [1], "the request in flight completes");
  await b;
  await closing;
});

test("a unit that times out has its queued polls skipped, not sent: a slow device costs the others one timeout", async () => {
  const t = new ScriptedTransport();
  const bus = new Bus(tcp, silentLogger(), t);
  t.fail = [new SitegateError("MODBUS_TIMEOUT", "no answer (timeout)", { transient: true })];
  const timedOut = assert.rejects(bus.read(2, "holding", 0, 1), (e) => (e as SitegateError).code === "MODBUS_TIMEOUT"); // starts at once
  // Queued while unit 2's request waits for its answer.
  const skipped = [1, 2].map((a) =>
    assert.rejects(
      bus.read(2, "holding", a, 1),
      (e) => (e as SitegateError).code === "MODBUS_TIMEOUT" && /skipped/.test((e as Error).message),
    ),
  );
  const other = bus.read(1, "holding", 5, 1);
  const control = bus.writeRegisters(2, 9, [1]);
  await Promise.all([timedOut, ...skipped, other, control]);
  assert.deepEqual(t.log, ["r2@0", "w2@9", "r1@5"], "unit 2's queued polls never reached the wire; its control write did");
  // A poll asked after the timeout goes on the wire again.
  assert.deepEqual(await bus.read(2, "holding", 3, 1), [2]);
  assert.deepEqual(t.log.at(-1), "r2@3");
  await bus.close();
});

test("a fresh connection stays quiet for the longest connect delay of its units before the first request", async () => {
  const t = new ScriptedTransport();
  let openedAt = 0;
  let firstAt = 0;
  const open = t.open.bind(t);
  t.open = async () => {
    await open();
    openedAt = performance.now();
  };
  const read = t.read.bind(t);
  t.read = async (...a: Parameters<typeof read>) => {
    firstAt ||= performance.now();
    return read(...a);
  };
  const bus = new Bus(tcp, silentLogger(), t);
  bus.setDeviceDelay(2, 0, 300); // a Huawei on the connection
  await bus.read(1, "holding", 0, 1); // the meter asks first: the quiet holds for it too
  // A lower bound: load can only make the wait longer (and an early timer is waited out).
  assert.ok(firstAt - openedAt >= 300, `first request ${firstAt - openedAt} ms after the connect`);
  // Later requests on the same connection do not wait again (nothing asserted on time: only that it works).
  assert.deepEqual(await bus.read(2, "holding", 1, 1), [2]);
  assert.equal(t.opens, 1);
  await bus.close();
});
