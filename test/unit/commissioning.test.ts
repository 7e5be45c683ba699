// Commissioning behind its interface: the scan reads a Modbus exception code from the
// error's `exception_code` entry (never from a message, nor from whichever entry comes
// first), and the status page's job runner works against any `Commissioning`: input
// checked before anything starts, the link closed once the job ends, the time cap.
import { test } from "node:test";
import assert from "node:assert/strict";
import { SitegateError } from "../../src/errors.js";
import { ModbusCommissioning, modbusExceptionCode, scanUnits } from "../../src/modbus/device/commission.js";
import { ownPrivateSubnets } from "../../src/modbus/device/commission-scope.js";
import { builtinProfiles } from "../../src/profiles/registry.js";
import type { Bus } from "../../src/modbus/bus.js";
import {
  ProbeInputError,
  type Commissioning,
  type CommissioningLink,
  type ScanHit,
  type ScanPlan,
  type ScanProgress,
} from "../../src/model/commissioning.js";
import { Jobs } from "../../src/ui/jobs.js";
import { silentLogger } from "../../src/log.js";
import { FakeClock } from "../support/fake-clock.js";
import { until } from "../support/wait.js";

/** A MODBUS_EXCEPTION whose message names another code than its data, with the code not first among its details. */
function exception(code: number, said: number): SitegateError {
  return new SitegateError("MODBUS_EXCEPTION", `read holding 0: exception ${said} (what the text says)`, {
    details: [
      { path: "function", message: "3" },
      { path: "exception_code", message: String(code) },
    ],
  });
}

test("the exception code is the error's exception_code entry, whatever the message or the order of the details", () => {
  assert.equal(modbusExceptionCode(exception(2, 11)), 2);
  assert.equal(modbusExceptionCode(exception(11, 2)), 11);
  assert.equal(modbusExceptionCode(new SitegateError("MODBUS_EXCEPTION", "exception 2")), undefined, "no entry: no code");
  assert.equal(
    modbusExceptionCode(new SitegateError("MODBUS_EXCEPTION", "x", { details: [{ path: "exception_code", message: "2 (illegal)" }] })),
    undefined,
    "an entry that is not a number is no code",
  );
  assert.equal(
    modbusExceptionCode(new SitegateError("MODBUS_TIMEOUT", "exception 2", { details: [{ path: "exception_code", message: "2" }] })),
    undefined,
  );
  assert.equal(modbusExceptionCode(new Error("exception 2")), undefined);
});

test("a scan counts a unit by its exception code: 10 and 11 (a TCP gateway's nobody there) are not found, others are", async () => {
  const answers: Record<number, SitegateError | null> = { 1: null, 2: exception(2, 10), 3: exception(10, 2), 4: exception(11, 3) };
  const bus = {
    read: async (unit: number) => {
      const e = answers[unit];
      if (e) throw e;
      return [0];
    },
  } as unknown as Bus;
  const found = await scanUnits(bus, { from: 1, to: 4, timeoutMs: 20 });
  assert.deepEqual(found, [
    { unit: 1, answer: "registers" },
    { unit: 2, answer: "exception 2" },
  ]);
});

/** A family in the test only: units 5 and 7 answer; every probe waits for the test to let it go. */
class FakeCommissioning implements Commissioning {
  opened = 0;
  closed = 0;
  release: (() => void) | null = null;

  checkScan(input: { endpoint?: unknown; from?: unknown; to?: unknown }): ScanPlan {
    if (typeof input.endpoint !== "string" || !input.endpoint.startsWith("fake:")) throw new ProbeInputError("an endpoint is fake:NAME");
    return { endpoint: input.endpoint, from: Number(input.from ?? 1), to: Number(input.to ?? 10), timeoutMs: 50, shared: false };
  }

  checkRead(): never {
    throw new ProbeInputError("reads are not offered here");
  }

  open(): CommissioningLink {
    this.opened++;
    return {
      scan: async (plan: ScanPlan, progress: (p: ScanProgress) => void, signal: AbortSignal) => {
        const found: ScanHit[] = [];
        for (let unit = plan.from; unit <= plan.to && !signal.aborted; unit++) {
          await new Promise<void>((r) => (this.release = r));
          if (unit === 5 || unit === 7) found.push({ unit, answer: "registers" });
          progress({ probed: unit - plan.from + 1, total: plan.to - plan.from + 1, found });
        }
        return found;
      },
      identify: async (unit: number) => (unit === 5 ? ["fake-profile"] : []),
      read: async () => assert.fail("no read"),
      close: async () => void this.closed++,
    };
  }
}

test("the page's jobs run on any Commissioning: bad input starts nothing, the time cap stops a scan, the link is closed", async () => {
  const fake = new FakeCommissioning();
  const clock = new FakeClock(Date.now());
  const jobs = new Jobs(fake, silentLogger(), { scanCapMs: 1000, clock });
  try {
    assert.throws(() => jobs.scan({ endpoint: "tcp://x" }), ProbeInputError);
    assert.equal(fake.opened, 0, "bad input opens no link");
    assert.equal(jobs.get(), null);

    const job = jobs.scan({ endpoint: "fake:one", from: 4, to: 9 });
    for (let i = 0; i < 4; i++) {
      await until(() => fake.release !== null, "a probe waits");
      const go = fake.release!;
      fake.release = null;
      go();
    }
    await until(() => job.probed === 4, "four probes done");
    clock.advance(1000); // the cap: the probe in flight is the last
    await until(() => fake.release !== null, "the fifth probe waits");
    fake.release!();
    await until(() => job.state !== "running", "the scan stops at the cap");
    assert.equal(job.state, "done");
    assert.deepEqual(
      job.found.map((f) => [f.unit, f.profiles]),
      [
        [5, ["fake-profile"]],
        [7, []],
      ],
    );
    assert.match(job.error ?? "", /^stopped at the 1 s time cap after 5 of 6 unit ids; scan the rest with from 9$/);
    assert.deepEqual([fake.opened, fake.closed], [1, 1]);
  } finally {
    await jobs.stop();
  }
});

test("the status page's scan reaches only configured RTU ports, polled endpoints and TCP hosts in commissioning.allow; the rest is refused at the check", () => {
  const polled = { key: "tcp://203.0.113.9:502" } as unknown as Bus;
  const buses = { all: () => [polled] };
  const scope = { rtuPaths: ["/dev/ttyUSB0"], allow: ["192.168.1.0/24", "fd00::/8"] };
  const c = new ModbusCommissioning(buses as never, builtinProfiles(), silentLogger(), scope);
  const scan = (endpoint: string) => c.checkScan({ endpoint, from: 1, to: 2, timeout_ms: 100 });
  const refused = (re: RegExp) => (e: unknown) => e instanceof ProbeInputError && re.test(e.message);
  for (const ep of ["rtu:/etc/shadow", "rtu:/dev/ttyUSB1?baud=9600", "rtu:/dev/../etc/shadow"])
    assert.throws(() => scan(ep), refused(/only a configured RTU port may be scanned \(rtu_ports: \/dev\/ttyUSB0\)/), ep);
  assert.throws(
    () => c.checkRead({ endpoint: "rtu:/etc/shadow", unit: 1, profile: "sdm630" }),
    refused(/configured RTU port/),
    "a read too",
  );
  for (const ep of ["tcp://10.0.0.5:502", "tcp://8.8.8.8:502", "tcp://127.0.0.1:22", "rtu-tcp://192.168.2.1:502", "tcp://[fe80::1]:502"])
    assert.throws(() => scan(ep), refused(/is outside commissioning\.allow \(192\.168\.1\.0\/24, fd00::\/8\)/), ep);
  assert.throws(() => scan("tcp://inverter.local:502"), refused(/must be an IP address/));
  assert.equal(scan("rtu:/dev/ttyUSB0?baud=9600").endpoint, "rtu:/dev/ttyUSB0?baud=9600");
  assert.equal(scan("tcp://192.168.1.20:502").shared, false);
  assert.equal(scan("tcp://[fd00::20]:502").shared, false);
  assert.equal(scan("tcp://203.0.113.9:502").shared, true, "an endpoint the daemon polls (a configured device's) is in scope");
  assert.throws(() => c.open("tcp://8.8.8.8:502"), refused(/outside commissioning\.allow/), "open checks again");
});

test("by default commissioning.allow is the private subnets of the gateway's own interfaces", () => {
  const c = new ModbusCommissioning({ all: () => [] } as never, builtinProfiles(), silentLogger(), { rtuPaths: [] });
  const own = ownPrivateSubnets();
  for (const cidr of own) assert.match(cidr, /^(10\.|172\.(1[6-9]|2\d|3[01])\.|192\.168\.|f[cd])/i, cidr);
  assert.throws(() => c.checkScan({ endpoint: "tcp://8.8.8.8:502" }), /outside commissioning\.allow/);
  assert.throws(() => c.checkScan({ endpoint: "tcp://127.0.0.1:502" }), /outside commissioning\.allow/, "loopback is no device subnet");
  const v4 = own.find((x) => !x.includes(":"));
  if (v4) assert.equal(c.checkScan({ endpoint: `tcp://${v4.split("/")[0]}:502` }).shared, false, `${v4} is in scope`);
});
