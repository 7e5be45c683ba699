// Authentication before parsing (src/api/guard.ts): whatever body an unauthenticated caller
// sends, huge, malformed or of the wrong type, the answer is 401 or 403, never 400, 413 or
// 415; and the token endpoint's client_id by HTTP Basic (RFC 6749 2.3.1). The real daemon
// over real HTTPS.
import { test } from "node:test";
import assert from "node:assert/strict";
import { configurePath, withGateway } from "../support/gateway.js";
import { testConfigInput, TEST_PASSWORD } from "../support/config.js";

const DR = "/v1/api/gateway/site-001/dr";
const OTHER_ORG = "00000000-0000-4000-8000-000000000000";
/** 10 MiB of valid JSON: forty times the body limit. */
const HUGE = JSON.stringify({ event_slots: [], pad: "x".repeat(10 * 1024 * 1024) });
const JSON_TYPE = { "content-type": "application/json" };

function assertError(r: { status: number; json: any; text: string }, status: number, code: string, what: string): void {
  assert.equal(r.status, status, `${what}: ${r.status} ${r.text.slice(0, 200)}`);
  assert.equal(r.json?.error, code, what);
}

test("admin route: an unauthenticated huge, malformed or mistyped body is 401, a foreign organization 403, before the body is read", async () => {
  await withGateway(async (gw) => {
    const cases: Array<[string, Record<string, string>, string]> = [
      ["10 MiB JSON, no token", JSON_TYPE, HUGE],
      ["10 MiB JSON, unknown token", { ...JSON_TYPE, authorization: "Bearer not-a-token" }, HUGE],
      ["malformed JSON, no token", JSON_TYPE, "{not json"],
      ["text/plain, no token", { "content-type": "text/plain" }, "hello"],
    ];
    for (const [what, headers, raw] of cases) {
      const r = await gw.call("PUT", configurePath(), { headers, raw });
      assertError(r, 401, "unauthorized", what);
      assert.match(String(r.headers["www-authenticate"]), /^Bearer/, what);
    }
    const auth = { authorization: `Bearer ${await gw.token()}` };
    const foreign = await gw.call("PUT", configurePath(OTHER_ORG), { headers: { ...auth, ...JSON_TYPE }, raw: HUGE });
    assertError(foreign, 403, "forbidden", "10 MiB JSON, valid token, another organization");
    const elsewhere = await gw.call("PUT", configurePath(undefined, "site-999"), { headers: { ...auth, ...JSON_TYPE }, raw: "{not json" });
    assertError(elsewhere, 404, "not_found", "malformed JSON, valid token, another site");
    // Once authenticated the body is read: the limits still hold.
    assertError(
      await gw.call("PUT", configurePath(), { headers: { ...auth, ...JSON_TYPE }, raw: HUGE }),
      413,
      "payload_too_large",
      "10 MiB JSON, valid token",
    );
    assertError(
      await gw.call("PUT", configurePath(), { headers: { ...auth, ...JSON_TYPE }, raw: "{not json" }),
      400,
      "invalid_request",
      "malformed JSON, valid token",
    );
  });
});

test("webhook routes: an unauthenticated huge or malformed body to /dr or to any path under the prefix is 401, before the body is read", async () => {
  await withGateway(async (gw) => {
    const cases: Array<[string, Record<string, string>, string]> = [
      ["10 MiB JSON, no key", JSON_TYPE, HUGE],
      ["10 MiB JSON, wrong key", { ...JSON_TYPE, "x-api-key": "nope" }, HUGE],
      ["malformed JSON, no key", JSON_TYPE, "{not json"],
      ["text/plain, no key", { "content-type": "text/plain" }, "hello"],
    ];
    for (const [what, headers, raw] of cases) assertError(await gw.call("POST", DR, { headers, raw }), 401, "unauthorized", what);
    const elsewhere = await gw.call("POST", "/v1/api/gateway/site-999/dr", { headers: { ...gw.apiKeyHeaders, ...JSON_TYPE }, raw: HUGE });
    assertError(elsewhere, 404, "not_found", "10 MiB JSON, valid key, another site");
    assertError(
      await gw.call("POST", DR, { headers: { ...gw.apiKeyHeaders, ...JSON_TYPE }, raw: HUGE }),
      413,
      "payload_too_large",
      "10 MiB JSON, valid key",
    );
    assertError(
      await gw.call("POST", DR, { headers: gw.apiKeyHeaders, body: {} }),
      400,
      "invalid_request",
      "the /dr route itself validates an authenticated body",
    );
    // A path under the prefix that no route serves is guarded the same way, then 404.
    const nowhere = "/v1/api/gateway/site-001/no-such-route";
    assertError(await gw.call("POST", nowhere, { headers: JSON_TYPE, raw: HUGE }), 401, "unauthorized", "no route, 10 MiB JSON, no key");
    assertError(
      await gw.call("POST", nowhere, { headers: { ...gw.apiKeyHeaders, ...JSON_TYPE }, raw: "{}" }),
      404,
      "not_found",
      "no route, valid key",
    );
  });
});

test("webhook route: a source off the allowlist gets 403 for a huge or malformed body, even with a valid key", async () => {
  await withGateway(
    async (gw) => {
      for (const [what, raw] of [
        ["10 MiB JSON", HUGE],
        ["malformed JSON", "{not json"],
      ]) {
        for (const headers of [JSON_TYPE, { ...JSON_TYPE, ...gw.apiKeyHeaders }] as Array<Record<string, string>>) {
          const r = await gw.call("POST", DR, { headers, raw });
          assertError(r, 403, "forbidden", `${what}, ${headers["x-api-key"] ? "valid key" : "no key"}`);
          assert.match(r.json.message, /allowlist/);
        }
      }
    },
    (dir) => ({ auth: { ...testConfigInput(dir).auth, ip_allowlist: ["192.0.2.0/24", "2001:db8::/32"] } }),
  );
});

test("token: client_id by HTTP Basic with an empty secret; a mismatch with the form or a secret is invalid_client", async () => {
  await withGateway(async (gw) => {
    const basic = (user: string, secret = "") => ({
      authorization: `Basic ${Buffer.from(`${encodeURIComponent(user)}:${secret}`).toString("base64")}`,
    });
    const creds = { grant_type: "password", username: "partner", password: TEST_PASSWORD };
    const token = async (headers: Record<string, string>, form: Record<string, string>) =>
      gw.call("POST", "/connect/token", { headers, form });

    const viaBasic = await token(basic("partner-portal"), creds);
    assert.equal(viaBasic.status, 200, viaBasic.text);
    assert.equal(viaBasic.json.token_type, "Bearer");
    const works = await gw.call("PUT", configurePath(), {
      headers: { authorization: `Bearer ${viaBasic.json.access_token}` },
      body: { devices: [] },
    });
    assert.equal(works.status, 400, "the token is accepted (the empty body is what is refused)");
    assert.equal(
      (await token(basic("partner-portal"), { ...creds, client_id: "partner-portal" })).status,
      200,
      "the same client_id in both places",
    );

    const refused: Array<[string, Record<string, string>, Record<string, string>]> = [
      ["Basic and form client_id differ", basic("partner-portal"), { ...creds, client_id: "someone-else" }],
      ["Basic names another client", basic("someone-else"), creds],
      ["Basic carries a secret", basic("partner-portal", "s3cret"), creds],
      ["Basic is not base64", { authorization: "Basic %%%" }, { ...creds, client_id: "partner-portal" }],
      ["Basic has no colon", { authorization: `Basic ${Buffer.from("partner-portal").toString("base64")}` }, creds],
    ];
    for (const [what, headers, form] of refused) {
      const r = await token(headers, form);
      assert.equal(r.status, 401, `${what}: ${r.text}`);
      assert.equal(r.json.error, "invalid_client", what);
      assert.match(String(r.headers["www-authenticate"]), /^Basic/, what);
      assert.equal(r.headers["cache-control"], "no-store", what);
    }
    const neither = await token({}, creds);
    assert.equal(neither.status, 400);
    assert.equal(neither.json.error, "invalid_request");
    assert.match(neither.json.error_description, /client_id/);
  });
});
