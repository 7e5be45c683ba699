// The simulator's faults of issue 39 (DESIGN B7), over real sockets with a Modbus client we
// did not write (modbus-serial): `refuse_writes` answers writes with the exception `code`
// and applies nothing, `offline` answers nothing at all until cleared while the device's
// physics go on, `late_first` delays only the first answer after a connect.
import { test } from "node:test";
import assert from "node:assert/strict";
import ModbusRTU from "modbus-serial";
import { withSite, tcpScenario, M124, type SimHandle, control } from "../support/site.js";
import { until } from "../support/wait.js";

type Client = InstanceType<typeof ModbusRTU.default>;

/** A fresh TCP connection to the site's first port, with the given answer timeout. */
async function client(site: SimHandle, unit: number, timeoutMs: number): Promise<Client> {
  const c = new ModbusRTU.default();
  await c.connectTCP("127.0.0.1", { port: site.tcpPorts[0]! });
  c.setID(unit);
  c.setTimeout(timeoutMs);
  return c;
}

async function close(c: Client): Promise<void> {
  await new Promise<void>((r) => c.close(() => r()));
}

const codeOf = (e: unknown) => (e as { modbusCode?: number }).modbusCode;
const isTimeout = (e: unknown) => /timed out/i.test((e as Error).message) || (e as { errno?: string }).errno === "ETIMEDOUT";

test("refuse_writes answers every write with the exception code and applies nothing; reads still answer; cleared, writes stick", async () => {
  await withSite(tcpScenario(), async (site) => {
    assert.equal((await control(site, "POST", "/faults", { device: "battery", fault: "refuse_writes", code: 3 })).status, 200);
    const c = await client(site, 1, 3000);
    try {
      const ctl = M124 + 5; // StorCtl_Mod
      await assert.rejects(c.writeRegister(ctl, 2), (e) => codeOf(e) === 3, "fn 6 refused with exception 3");
      await assert.rejects(c.writeRegisters(ctl, [2]), (e) => codeOf(e) === 3, "fn 16 refused with exception 3");
      assert.equal((await c.readHoldingRegisters(ctl, 1)).data[0], 0, "nothing applied; reads answer");
      const log = site.state().devices.battery!.writes as Array<{ refused?: number }>;
      assert.deepEqual(
        log.map((w) => w.refused),
        [3, 3],
        "both writes logged as refused",
      );
      assert.equal(site.state().devices.battery!.online, true);

      await control(site, "POST", "/faults", { device: "battery", fault: "refuse_writes" });
      await assert.rejects(c.writeRegister(ctl, 2), (e) => codeOf(e) === 4, "the default code is 4");
      assert.equal((await control(site, "DELETE", "/faults/battery")).status, 200);
      await c.writeRegister(ctl, 2);
      assert.equal((await c.readHoldingRegisters(ctl, 1)).data[0], 2, "cleared: the write sticks");
    } finally {
      await close(c);
    }
  });
});

test("offline: the device answers nothing (reads and writes), shows offline, its physics go on, and it answers again once cleared", async () => {
  await withSite(tcpScenario(0), async (site) => {
    const c = await client(site, 1, 800);
    const pv = await client(site, 2, 3000);
    try {
      const ctl = M124 + 5;
      // A discharge at 40 % of WChaMax (OutWRte +12), then the device goes offline.
      await c.writeRegister(M124 + 12, 40);
      await c.writeRegister(ctl, 2);
      await until(() => (site.state().devices.battery!.power_w as number) > 1000, "discharging");
      assert.equal((await control(site, "POST", "/faults", { device: "battery", fault: "offline" })).status, 200);
      assert.equal(site.state().devices.battery!.online, false);
      await assert.rejects(c.readHoldingRegisters(40000, 2), isTimeout, "a read gets no answer");
      await assert.rejects(c.writeRegister(ctl, 0), isTimeout, "a write gets no answer");
      assert.equal((await pv.readHoldingRegisters(40000, 2)).data[0], 0x5375, "another unit on the port answers");
      assert.ok((site.state().devices.battery!.power_w as number) > 1000, "it goes on discharging: the unanswered write did nothing");

      assert.equal((await control(site, "DELETE", "/faults/battery")).status, 200);
      assert.equal(site.state().devices.battery!.online, true);
      const back = await client(site, 1, 3000);
      try {
        assert.equal((await back.readHoldingRegisters(40000, 2)).data[0], 0x5375, "it answers again");
      } finally {
        await close(back);
      }
    } finally {
      await close(c);
      await close(pv);
    }
  });
});

test("late_first: the first answer after a connect is late (past the client's timeout), the next ones are not; a new connection is late again", async () => {
  await withSite(tcpScenario(), async (site) => {
    site.setFault({ device: "grid", fault: "late_first", delay_ms: 1500 });
    // A late answer cannot come early: 1.5 s late misses a 0.5 s timeout whatever the load.
    const c = await client(site, 3, 500);
    try {
      await assert.rejects(c.readHoldingRegisters(40000, 1), isTimeout, "the first answer is late");
      c.setTimeout(10_000);
      // Queued behind the late one on the same connection; answered.
      assert.equal((await c.readHoldingRegisters(40000, 1)).data[0], 0x5375);
      // On time now: within a timeout shorter than the fault's delay.
      c.setTimeout(1400);
      for (let i = 0; i < 3; i++) assert.equal((await c.readHoldingRegisters(40000, 1)).data[0], 0x5375, `answer ${i + 3} on time`);
    } finally {
      await close(c);
    }
    const again = await client(site, 3, 500);
    try {
      await assert.rejects(again.readHoldingRegisters(40000, 1), isTimeout, "after a new connect, late again");
    } finally {
      await close(again);
    }
    site.clearFaults("grid");
    const plain = await client(site, 3, 1400);
    try {
      assert.equal((await plain.readHoldingRegisters(40000, 1)).data[0], 0x5375, "cleared: on time from the first answer");
    } finally {
      await close(plain);
    }
  });
});

test("the control API takes the new faults by name and still refuses unknown ones", async () => {
  await withSite(tcpScenario(), async (site) => {
    for (const fault of ["refuse_writes", "offline", "late_first"])
      assert.equal((await control(site, "POST", "/faults", { device: "pv", fault })).status, 200, fault);
    assert.deepEqual((site.state().devices.pv!.faults as Array<{ fault: string }>).map((f) => f.fault).sort(), [
      "late_first",
      "offline",
      "refuse_writes",
    ]);
    assert.equal((await control(site, "DELETE", "/faults")).status, 200);
    assert.deepEqual(site.state().devices.pv!.faults, []);
    assert.equal((await control(site, "POST", "/faults", { device: "pv", fault: "offline_please" })).status, 400);
  });
});
