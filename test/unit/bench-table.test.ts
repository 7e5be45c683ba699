import { test } from "node:test";
import assert from "node:assert/strict";
import { table } from "../bench/run.js";
import { flagSets, runInChild } from "../bench/in-child.js";

test("the bench table has one aligned row per figure with ratio and reference", () => {
  const out = table([
    { name: "tcp poll", value: 12345.6, unit: "reg/s", reference: 15000, ratio: 0.823, note: "mbpoll" },
    { name: "bytes per sample", value: 11.2, unit: "B", reference: 40.7, ratio: 3.63 },
    { name: "no ref", value: 0.5, unit: "ms", reference: null, ratio: null },
  ]).split("\n");
  assert.equal(out.length, 5);
  assert.match(out[2], /^tcp poll\s+12,346\s+reg\/s\s+15,000\s+0\.82x\s+mbpoll$/);
  assert.match(out[3], /bytes per sample\s+11\.2\s+B\s+40\.7\s+3\.63x/);
  assert.match(out[4], /no ref\s+0\.500\s+ms\s+-\s+-/);
});

test("a reference spawned for a ratio runs under the node flags it is given", async () => {
  const refs = new URL("../bench/references.js", import.meta.url).href;
  const unit = flagSets().unit;
  assert.ok(unit.nodeArgs.includes("--jitless"), `the unit's flags: ${unit.nodeArgs.join(" ")}`);
  assert.deepEqual(await runInChild<string[]>(refs, "nodeFlags", null, unit), unit.nodeArgs);
  assert.deepEqual(await runInChild<string[]>(refs, "nodeFlags", null, flagSets().plain), []);
});

test("the API references check what the daemon's routes check: TLS, the allowlist and the API key", async () => {
  const { guardedFastify } = await import("../bench/references.js");
  const { request, Agent } = await import("undici");
  const { testCert } = await import("../support/tls.js");
  const dispatcher = new Agent({ connect: { ca: testCert().cert } });
  const call = async (app: import("fastify").FastifyInstance<import("node:https").Server>, headers: Record<string, string>) => {
    app.get("/x", async () => ({ ok: true }));
    await app.listen({ host: "127.0.0.1", port: 0 });
    try {
      const port = (app.server.address() as { port: number }).port;
      return (await request(`https://127.0.0.1:${port}/x`, { headers, dispatcher })).statusCode;
    } finally {
      await app.close();
    }
  };
  try {
    const allowed = { allowlist: ["127.0.0.1/32"], apiKey: "k-0123" };
    assert.equal(await call(guardedFastify(allowed), { "x-api-key": "k-0123" }), 200);
    assert.equal(await call(guardedFastify(allowed), {}), 401);
    assert.equal(await call(guardedFastify(allowed), { "x-api-key": "k-0124" }), 401);
    assert.equal(await call(guardedFastify({ ...allowed, allowlist: ["10.0.0.0/8"] }), { "x-api-key": "k-0123" }), 403);
  } finally {
    await dispatcher.close();
  }
});
