// Wrong X-API-Key guesses at the webhook routes over real HTTPS:
// sent together, KEY_IP_FAILURES are answered 401 and the rest 429 with Retry-After, no
// more scrypt for that source within the minute; the partner's key, verified before,
// still works from it, and the token endpoint is not locked by key guesses.
import { test } from "node:test";
import assert from "node:assert/strict";
import { withGateway } from "../support/gateway.js";
import { TEST_API_KEY, TEST_PASSWORD } from "../support/config.js";
import { KEY_IP_FAILURES } from "../../src/api/auth.js";

const SYNC = "/v1/api/gateway/site-001/devicesync";

test("API key guessing: past the source's failures a minute, 429 with Retry-After; the verified key and the token endpoint still work", async () => {
  await withGateway(async (gw) => {
    assert.equal((await gw.call("GET", SYNC, { headers: { "x-api-key": TEST_API_KEY } })).status, 200);
    const answers = await Promise.all(
      Array.from({ length: KEY_IP_FAILURES + 10 }, (_, i) => gw.call("GET", SYNC, { headers: { "x-api-key": `guess-${i}` } })),
    );
    const by = (s: number) => answers.filter((a) => a.status === s);
    assert.equal(by(401).length, KEY_IP_FAILURES, answers.map((a) => a.status).join(","));
    assert.equal(by(429).length, 10);
    const refused = by(429)[0]!;
    assert.equal(refused.json.error, "rate_limited");
    assert.match(refused.json.message, /too many wrong API keys from 127\.0\.0\.1; retry in \d+ s/);
    assert.ok(Number(refused.headers["retry-after"]) >= 1);
    assert.equal((await gw.call("GET", SYNC, { headers: { "x-api-key": "guess-again" } })).status, 429);
    assert.equal((await gw.call("GET", SYNC, { headers: { "x-api-key": TEST_API_KEY } })).status, 200);
    const token = await gw.call("POST", "/connect/token", {
      form: { grant_type: "password", client_id: "partner-portal", username: "partner", password: TEST_PASSWORD },
    });
    assert.equal(token.status, 200, token.text);
  });
});
