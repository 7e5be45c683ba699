// `sitegate scan` on a serial port another process holds (the running gateway, usually)
// names who holds it instead of a bare "Cannot lock port".
import { test } from "node:test";
import assert from "node:assert/strict";
import { withSite, demoScenario } from "../support/site.js";
import { runCli } from "../support/cli.js";
import { Bus } from "../../src/modbus/bus.js";
import { parseEndpoint } from "../../src/modbus/endpoint.js";
import { silentLogger } from "../../src/log.js";

test("scan on a serial port another process holds says which process holds it", async () => {
  await withSite(demoScenario(), async (site) => {
    const endpoint = `rtu:${site.rtuPeers[0]}?baud=9600`;
    // This test process holds the port, as the gateway would: opened and locked by a read.
    const bus = new Bus(parseEndpoint(endpoint), silentLogger());
    try {
      await bus.read(10, "holding", 0, 1, { timeoutMs: 2000 }).catch(() => undefined);
      const r = await runCli("scan", "--endpoint", endpoint, "--from", "10", "--to", "10");
      assert.equal(r.code, 1, r.stdout);
      assert.match(r.stderr, /cannot lock port/i);
      assert.match(r.stderr, new RegExp(`is held by pid ${process.pid} \\(`), r.stderr);
      assert.match(r.stderr, /status page's commissioning form/);
    } finally {
      await bus.close();
    }
  });
});
