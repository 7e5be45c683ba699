// What a config that works but is not finished for a site is warned about, by key: init's
// placeholders (the nil organization UUID, partner.invalid URLs), names reserved for
// documentation, and an allowlist of loopback only in front of an API on the network.
import { test } from "node:test";
import assert from "node:assert/strict";
import { testConfig, testConfigInput } from "../support/config.js";
import { withTmpDir } from "../support/tmp.js";
import type { ConfigInput } from "../../src/config/schema.js";
import { PLACEHOLDER_ORGANIZATION_ID, unfinishedConfig, unfinishedWarning } from "../../src/config/unfinished.js";

const paths = (over: Partial<ConfigInput>) => withTmpDir((dir) => unfinishedConfig(testConfig(dir, over)).map((u) => u.path));
/** The test config's blocks, to override one key of them. */
const testConfigInputOf = (): ConfigInput => testConfigInput("/nonexistent");
const auth = (listen: string, ip_allowlist: string[]): Partial<ConfigInput> => {
  const base = testConfigInputOf();
  return { http: { ...base.http, listen }, auth: { ...base.auth, ip_allowlist } };
};

test("the tests' own config (a loopback API for loopback callers, 127.0.0.1 partner URLs) is finished", async () => {
  assert.deepEqual(await paths({}), []);
});

test("init's placeholders are named: the nil organization UUID and .invalid partner URLs", async () => {
  const base = testConfigInputOf();
  const found = await paths({
    organization_id: PLACEHOLDER_ORGANIZATION_ID,
    partner: { ...base.partner, execution_url: "https://partner.invalid/exec", data_push_url: "https://partner.invalid" },
  });
  assert.deepEqual(found, ["organization_id", "partner.execution_url", "partner.data_push_url"]);
});

test("names reserved for documentation are placeholders too; a real-looking name is not", async () => {
  const base = testConfigInputOf();
  const partner = (execution_url: string) => ({ partner: { ...base.partner, execution_url } });
  for (const url of ["https://partner.example/exec", "https://api.example.com/x", "https://EXAMPLE.ORG/", "https://p.test/exec"])
    assert.deepEqual(await paths(partner(url)), ["partner.execution_url"], url);
  for (const url of ["https://example.community/exec", "https://partner-example.com/exec", "https://invalid.energy/x"])
    assert.deepEqual(await paths(partner(url)), [], url);
});

test("an allowlist of loopback only is unfinished only while the API listens beyond loopback", async () => {
  const loopback = ["127.0.0.1/32", "::1/128"];
  assert.deepEqual(await paths(auth("0.0.0.0:8443", loopback)), ["auth.ip_allowlist"]);
  assert.deepEqual(await paths(auth("[::]:8443", ["127.0.0.0/8"])), ["auth.ip_allowlist"]);
  assert.deepEqual(await paths(auth("192.168.1.20:8443", ["::1/128"])), ["auth.ip_allowlist"]);
  // a partner's range admitted, or an API only loopback can reach: nothing to say
  assert.deepEqual(await paths(auth("0.0.0.0:8443", [...loopback, "10.0.0.0/8"])), []);
  assert.deepEqual(await paths(auth("0.0.0.0:8443", ["0.0.0.0/0"])), []);
  assert.deepEqual(await paths(auth("127.0.0.1:8443", loopback)), []);
  assert.deepEqual(await paths(auth("localhost:8443", loopback)), []);
});

test("/healthz gets one warning that names every unfinished key; none when the config is finished", () => {
  assert.deepEqual(unfinishedWarning([]), []);
  const w = unfinishedWarning([
    { path: "organization_id", message: "m" },
    { path: "partner.execution_url", message: "m" },
  ]);
  assert.deepEqual(w, [
    {
      code: "unfinished_config",
      message: "degraded: unfinished config: organization_id, partner.execution_url (sitegate check-config names each)",
    },
  ]);
});
