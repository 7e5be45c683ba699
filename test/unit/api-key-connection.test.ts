// The webhook guard checks X-API-Key on every request; a keep-alive connection that has
// shown a valid key is answered by a constant-time compare with that key, not a full check
// (hash, and scrypt the first time) per request. Any other key on it is checked in full.
import { test } from "node:test";
import assert from "node:assert/strict";
import Fastify from "fastify";
import { Agent, request } from "undici";
import { Credentials } from "../../src/api/auth.js";
import { installGuards } from "../../src/api/guard.js";
import type { ApiContext } from "../../src/api/context.js";
import { testCert } from "../support/tls.js";
import { TEST_API_KEY, testConfig } from "../support/config.js";
import { asSitegateError, errorAnswer } from "../../src/services/errors.js";

test("a keep-alive connection that showed a valid API key is not checked in full again; a wrong key on it still is, and refused", async () => {
  const config = testConfig("/tmp/sitegate-unit");
  const credentials = new Credentials(config);
  let full = 0;
  const check = credentials.checkApiKey.bind(credentials);
  credentials.checkApiKey = (key: string, source: string) => {
    full++;
    return check(key, source);
  };
  const { key, cert } = testCert();
  const app = Fastify({ https: { key, cert } });
  installGuards(app, { credentials, config } as unknown as ApiContext);
  app.setErrorHandler((err, _req, reply) => reply.code(errorAnswer(asSitegateError(err)).status).send({}));
  app.get("/:version/api/gateway/:site/devicesync", { config: { auth: "webhook" } }, async () => ({ ok: true }));
  await app.listen({ host: "127.0.0.1", port: 0 });
  const url = `https://127.0.0.1:${(app.server.address() as { port: number }).port}/v1/api/gateway/${config.site_id}/devicesync`;
  const one = new Agent({ connect: { ca: cert }, connections: 1, pipelining: 1 });
  const other = new Agent({ connect: { ca: cert }, connections: 1, pipelining: 1 });
  const get = async (dispatcher: Agent, apiKey: string) => {
    const r = await request(url, { headers: { "x-api-key": apiKey }, dispatcher });
    await r.body.text();
    return r.statusCode;
  };
  try {
    for (let i = 0; i < 5; i++) assert.equal(await get(one, TEST_API_KEY), 200);
    assert.equal(full, 1, "one full check for five requests on one connection");
    assert.equal(await get(one, `${TEST_API_KEY.slice(0, -1)}x`), 401, "a wrong key on a connection that showed a valid one");
    assert.equal(await get(one, "short"), 401);
    assert.equal(full, 3);
    assert.equal(await get(one, TEST_API_KEY), 200, "the valid key again on the same connection");
    assert.equal(full, 3);
    assert.equal(await get(other, TEST_API_KEY), 200, "another connection");
    assert.equal(full, 4);
  } finally {
    await one.close();
    await other.close();
    await app.close();
  }
});
