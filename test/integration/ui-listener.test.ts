// The status page on a listener of its own (ui.listen), the ui.allow address list, and the
// page being absent unless configured.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Agent, request } from "undici";
import { startGateway } from "../support/gateway.js";
import { withTmpDir } from "../support/tmp.js";
import { testCert } from "../support/tls.js";
import type { UiPart } from "../../src/ui/part.js";

const agent = new Agent({ connect: { ca: testCert().cert } });
async function get(url: string) {
  const r = await request(url, { dispatcher: agent });
  await r.body.text();
  return { status: r.statusCode, headers: r.headers };
}

test("with ui.listen the page has its own HTTPS listener and is not on the API listener", async () => {
  await withTmpDir(async (dir) => {
    const gw = await startGateway(dir, { ui: { enabled: true, listen: "127.0.0.1:0" } });
    try {
      const ui = gw.daemon.part<UiPart>("ui");
      assert.notEqual(ui.port, 0);
      const own = await get(`${ui.url}/ui/`);
      assert.equal(own.status, 303);
      assert.equal(own.headers.location, "/ui/login");
      // The listener's root leads to the page.
      const root = await get(`${ui.url}/`);
      assert.equal(root.status, 302);
      assert.equal(root.headers.location, "/ui/");
      assert.equal((await get(`${ui.url}/ui/login`)).status, 200);
      assert.equal((await get(`${ui.url}/ui/login`)).headers["x-frame-options"], "DENY");
      // The partner API is not served there, and the page not on the API listener.
      assert.notEqual((await get(`${ui.url}/openapi.json`)).status, 200);
      assert.equal((await gw.call("GET", "/ui/login")).status, 404);
      // The API listener's root is the API's own JSON 404: the page is not there.
      const apiRoot = await gw.call("GET", "/");
      assert.equal(apiRoot.status, 404);
      assert.equal(apiRoot.json.error, "not_found");
    } finally {
      await gw.stop();
    }
  });
});

test("a source outside ui.allow is refused before anything else", async () => {
  await withTmpDir(async (dir) => {
    const gw = await startGateway(dir, { ui: { enabled: true, allow: ["10.0.0.0/8"] } });
    try {
      for (const p of ["/ui/login", "/ui/", "/ui/api/overview"]) {
        const r = await gw.call("GET", p);
        assert.equal(r.status, 403, p);
        assert.match(r.text, /ui\.allow/);
        assert.equal(r.headers["x-content-type-options"], "nosniff");
      }
      // The partner API is unaffected.
      assert.equal((await gw.call("GET", "/openapi.json")).status, 200);
    } finally {
      await gw.stop();
    }
  });
});

test("without a ui block there is no status page", async () => {
  await withTmpDir(async (dir) => {
    const gw = await startGateway(dir);
    try {
      assert.equal((await gw.call("GET", "/ui/login")).status, 404);
      // No page to lead to: the root is the API's JSON 404 as before.
      const root = await gw.call("GET", "/");
      assert.equal(root.status, 404);
      assert.equal(root.json.error, "not_found");
    } finally {
      await gw.stop();
    }
  });
});
