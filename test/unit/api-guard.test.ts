// The guard's registration rule (src/api/guard.ts): a route under the webhook or admin
// prefix that does not declare its auth is refused when the app is built, so none can be
// left open; a route that declares it gets the guard as its last onRequest hook.
import { test } from "node:test";
import assert from "node:assert/strict";
import Fastify from "fastify";
import { installGuards, requiredAuth } from "../../src/api/guard.js";
import type { ApiContext } from "../../src/api/context.js";
import { testCert } from "../support/tls.js";

/** The guards read the context only when a request arrives; building needs none. */
const ctx = {} as ApiContext;

function appWith(register: (app: ReturnType<typeof build>) => void) {
  const app = build();
  installGuards(app, ctx);
  register(app);
  return app;
}
function build() {
  const { key, cert } = testCert();
  return Fastify({ https: { key, cert } });
}

test("a route under a guarded prefix without its auth option is refused at registration", async () => {
  const cases: Array<[string, "webhook" | "admin", Record<string, unknown>]> = [
    ["/:version/api/gateway/:site/dr", "webhook", {}],
    ["/:api_version/api/gateway/:site_id/new-thing", "webhook", { config: { auth: "admin" } }],
    ["/gateway/admin/device/remove", "admin", {}],
    ["/gateway/admin/device/configure", "admin", { config: { auth: "webhook" } }],
  ];
  for (const [url, kind, opts] of cases) {
    const app = appWith((a) => {
      a.register(async (scope) => {
        scope.post(url, opts, async () => ({}));
      });
    });
    await assert.rejects(
      async () => {
        await app.ready();
      },
      new RegExp(`POST ${url.replace(/[/:]/g, "\\$&")} must declare config: \\{ auth: "${kind}" \\}`),
      url,
    );
    await app.close();
  }
});

test("a route that declares its auth gets the guard after its own onRequest hooks; other routes are left alone", async () => {
  const seen: Record<string, number> = {};
  const own = async () => {};
  const app = appWith((a) => {
    a.addHook("onRoute", (r) => {
      seen[`${String(r.method)} ${r.url}`] = Array.isArray(r.onRequest) ? r.onRequest.length : r.onRequest ? 1 : 0;
    });
    a.post("/:version/api/gateway/:site/dr", { config: { auth: "webhook" }, onRequest: own }, async () => ({}));
    a.put("/gateway/admin/device/configure", { config: { auth: "admin" } }, async () => ({}));
    a.get("/healthz", async () => ({}));
  });
  await app.ready();
  // onRoute hooks run in the order they were added: installGuards' first, so these counts include the guard.
  assert.equal(seen["POST /:version/api/gateway/:site/dr"], 2, "its own hook, then the guard");
  assert.equal(seen["PUT /gateway/admin/device/configure"], 1);
  assert.equal(seen["GET /healthz"], 0);
  await app.close();
  assert.equal(requiredAuth("/v1/api/gateway/site-001/devicesync"), "webhook");
  assert.equal(requiredAuth("/gateway/admin/device/configure"), "admin");
  assert.equal(requiredAuth("/connect/token"), undefined);
});
