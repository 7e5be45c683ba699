// The simulator driven by a Modbus client we did not write: mbpoll (Debian), over TCP
// and over the socat pty, plus the control API's view of what physically happened.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { withSite, demoScenario, tcpScenario, M124, type SimHandle, control } from "../support/site.js";

const run = promisify(execFile);

/** Runs mbpoll once and returns the register values it printed, by reference number. */
async function mbpoll(args: string[]): Promise<{ values: Map<number, number>; out: string; code: number }> {
  try {
    const { stdout } = await run("mbpoll", [...args, "-1", ...(args.includes("-o") ? [] : ["-o", "1"])], { timeout: 15000 });
    return { values: parse(stdout), out: stdout, code: 0 };
  } catch (e) {
    const err = e as { stdout?: string; stderr?: string; code?: number };
    return { values: parse(err.stdout ?? ""), out: `${err.stdout ?? ""}${err.stderr ?? ""}`, code: err.code ?? 1 };
  }
}

function parse(out: string): Map<number, number> {
  const m = new Map<number, number>();
  for (const line of out.split("\n")) {
    const r = /^\[(\d+)\]:\s+(-?[\d.e+-]+)/.exec(line.trim());
    if (r) m.set(Number(r[1]), Number(r[2]));
  }
  return m;
}

const tcp = (site: SimHandle, unit: number) => ["-m", "tcp", "-p", String(site.tcpPorts[0]), "-a", String(unit), "-0"];
const tcpHost = "127.0.0.1";

test("mbpoll over TCP reads the SunSpec marker, the common model and the model chain", async () => {
  await withSite(tcpScenario(), async (site) => {
    const r = await mbpoll([...tcp(site, 1), "-t", "4", "-r", "40000", "-c", "4", tcpHost]);
    assert.equal(r.values.get(40000), 0x5375, r.out);
    assert.equal(r.values.get(40001), 0x6e53);
    assert.equal(r.values.get(40002), 1, "common model first");
    assert.equal(r.values.get(40003), 66);
    // Walk the chain: 1 (66) -> 103 (50) -> 120 (26) -> 123 (24) -> 124 (24) -> end.
    let addr = 40002;
    const ids: number[] = [];
    for (let i = 0; i < 8; i++) {
      const h = await mbpoll([...tcp(site, 1), "-t", "4", "-r", String(addr), "-c", "2", tcpHost]);
      const id = h.values.get(addr)!;
      ids.push(id);
      if (id === 0xffff) break;
      addr += 2 + h.values.get(addr + 1)!;
    }
    assert.deepEqual(ids, [1, 103, 120, 123, 124, 0xffff]);
    const meter = await mbpoll([...tcp(site, 3), "-t", "4", "-r", "40070", "-c", "2", tcpHost]);
    assert.equal(meter.values.get(40070), 203);
    assert.equal(meter.values.get(40071), 105);
  });
});

test("a storage setpoint written with mbpoll makes the battery discharge and the meter follow", async () => {
  await withSite(tcpScenario(0), async (site) => {
    const m124 = M124; // OutWRte is offset 12, StorCtl_Mod 5
    const hdr = await mbpoll([...tcp(site, 1), "-t", "4", "-r", String(m124), "-c", "2", tcpHost]);
    assert.equal(hdr.values.get(m124), 124, hdr.out);
    const before = site.state();
    assert.equal(before.devices.battery.power_w, 0);
    const gridBefore = before.devices.grid.power_w as number;
    assert.equal((await mbpoll([...tcp(site, 1), "-t", "4", "-r", String(m124 + 12), tcpHost, "40"])).code, 0);
    assert.equal((await mbpoll([...tcp(site, 1), "-t", "4", "-r", String(m124 + 5), tcpHost, "2"])).code, 0);
    const after = site.state();
    assert.equal(after.devices.battery.power_w, 2000, "40 % of 5000 W");
    assert.ok(
      Math.abs((after.devices.grid.power_w as number) - (gridBefore - 2000)) < 50,
      `grid ${gridBefore} -> ${after.devices.grid.power_w}`,
    );
    const writes = after.devices.battery.writes as Array<{ fn: number; address: number; values: number[] }>;
    assert.deepEqual(
      writes.map((w) => [w.fn, w.address, w.values[0]]),
      [
        [6, m124 + 12, 40],
        [6, m124 + 5, 2],
      ],
    );
    // The inverter model's W reads the same power back.
    const w = await mbpoll([...tcp(site, 1), "-t", "4", "-r", "40084", "-c", "1", tcpHost]);
    assert.equal(w.values.get(40084), 2000);
  });
});

test("writes to read-only registers and reads of unmapped addresses answer exception 2", async () => {
  await withSite(tcpScenario(), async (site) => {
    const ro = await mbpoll([...tcp(site, 1), "-t", "4", "-r", "40084", tcpHost, "123"]);
    assert.notEqual(ro.code, 0);
    assert.match(ro.out, /Illegal data address/i);
    const unmapped = await mbpoll([...tcp(site, 1), "-t", "4", "-r", "30000", "-c", "2", tcpHost]);
    assert.match(unmapped.out, /Illegal data address/i);
    assert.deepEqual(site.state().devices.battery.writes, []);
  });
});

test("mbpoll over the RTU pty reads the SDM630 and switches relay coils, with CRC-checked frames", async () => {
  await withSite(demoScenario({ pv_irradiance: 0 }), async (site) => {
    const rtu = (unit: number) => ["-m", "rtu", "-b", "9600", "-P", "none", "-a", String(unit), "-0"];
    const p = await mbpoll([...rtu(10), "-t", "3:float", "-B", "-r", "52", "-c", "1", site.rtuPeers[0]]);
    const grid = site.state().devices.sdm.power_w as number;
    assert.ok(Math.abs(p.values.get(52)! - grid) < 60, `${p.out} vs ${grid}`);
    assert.equal((await mbpoll([...rtu(11), "-t", "0", "-r", "1", site.rtuPeers[0], "0"])).code, 0);
    assert.deepEqual(site.state().devices.relay.coils, [true, false, true, true]);
    const coils = await mbpoll([...rtu(11), "-t", "0", "-r", "0", "-c", "4", site.rtuPeers[0]]);
    assert.deepEqual(
      [0, 1, 2, 3].map((i) => coils.values.get(i)),
      [1, 0, 1, 1],
    );
    // A unit id with no device stays silent on RTU.
    const none = await mbpoll([...rtu(99), "-t", "3", "-r", "0", "-c", "2", "-t", "3", site.rtuPeers[0]]);
    assert.notEqual(none.code, 0);
  });
});

test("each fault takes effect and clears", async () => {
  await withSite(tcpScenario(), async (site) => {
    const read = () => mbpoll([...tcp(site, 2), "-t", "4", "-r", "40000", "-c", "2", "-t", "4", tcpHost]);
    assert.equal((await read()).values.get(40000), 0x5375);

    assert.equal((await control(site, "POST", "/faults", { device: "pv", fault: "exception", code: 6 })).status, 200);
    assert.match((await read()).out, /busy/i, "exception 6 = slave device busy");
    assert.equal((await control(site, "DELETE", "/faults/pv")).status, 200);
    assert.equal((await read()).values.get(40000), 0x5375);

    await control(site, "POST", "/faults", { device: "pv", fault: "no_answer" });
    assert.equal(site.state().devices.pv.online, false);
    const silent = await read();
    assert.equal(silent.values.size, 0);
    assert.match(silent.out, /timed out/i);
    // Another unit on the same port is unaffected.
    assert.equal((await mbpoll([...tcp(site, 1), "-t", "4", "-r", "40000", "-c", "1", tcpHost])).values.get(40000), 0x5375);
    await control(site, "DELETE", "/faults");
    assert.equal(site.state().devices.pv.online, true);

    await control(site, "POST", "/faults", { device: "pv", fault: "drop" });
    assert.equal((await read()).values.size, 0);
    site.clearFaults();

    await control(site, "POST", "/faults", { device: "pv", fault: "crc" });
    assert.equal((await read()).values.size, 0, "a malformed frame gives no values");
    site.clearFaults("pv");

    await control(site, "POST", "/faults", { device: "battery", fault: "ignore_writes" });
    const m124 = M124;
    assert.equal((await mbpoll([...tcp(site, 1), "-t", "4", "-r", String(m124 + 5), tcpHost, "2"])).code, 0, "the write is acknowledged");
    const ctl = await mbpoll([...tcp(site, 1), "-t", "4", "-r", String(m124 + 5), "-c", "1", tcpHost]);
    assert.equal(ctl.values.get(m124 + 5), 0, "but does not stick");
    site.clearFaults();
    await mbpoll([...tcp(site, 1), "-t", "4", "-r", String(m124 + 5), tcpHost, "2"]);
    assert.equal((await mbpoll([...tcp(site, 1), "-t", "4", "-r", String(m124 + 5), "-c", "1", tcpHost])).values.get(m124 + 5), 2);
  });
});

test("a delay fault slows answers by the given time", async () => {
  await withSite(tcpScenario(), async (site) => {
    site.setFault({ device: "grid", fault: "delay", delay_ms: 1500 });
    // mbpoll's timeout is 1 s by default: the delayed answer misses it, a 3 s timeout catches it.
    const late = await mbpoll(["-m", "tcp", "-p", String(site.tcpPorts[0]), "-a", "3", "-0", "-t", "4", "-r", "40000", "-c", "1", tcpHost]);
    assert.match(late.out, /timed out/i);
    const patient = await mbpoll([
      "-m",
      "tcp",
      "-p",
      String(site.tcpPorts[0]),
      "-a",
      "3",
      "-0",
      "-o",
      "3",
      "-t",
      "4",
      "-r",
      "40000",
      "-c",
      "1",
      tcpHost,
    ]);
    assert.equal(patient.values.get(40000), 0x5375, patient.out);
  });
});

test("the control API rejects bad faults and unknown devices, and adjusts the site", async () => {
  await withSite(tcpScenario(0), async (site) => {
    assert.equal((await control(site, "POST", "/faults", { device: "nope", fault: "no_answer" })).status, 404);
    assert.equal((await control(site, "POST", "/faults", { device: "pv", fault: "gremlins" })).status, 400);
    const s = await control(site, "POST", "/site", { base_load_w: 3000 });
    assert.equal(s.status, 200);
    assert.ok(Math.abs((site.state().devices.grid.power_w as number) - 3000) < 1);
    const b = await control(site, "POST", "/devices/battery", { soc_pct: 100 });
    assert.equal(b.json.soc_pct, 100);
    assert.equal((await control(site, "GET", "/nowhere")).status, 404);
  });
});
