// A logged-in status page session over HTTPS (the test certificate), for tests that read
// the page's API as the page does.
import assert from "node:assert/strict";
import { Agent, request } from "undici";
import { TEST_PASSWORD } from "./config.js";
import { testCert } from "./tls.js";

export const uiAgent = new Agent({ connect: { ca: testCert().cert } });

/** Logs in as the partner user; returns the session cookie. */
export async function uiSession(url: string): Promise<string> {
  const page = await request(`${url}/ui/login`, { dispatcher: uiAgent });
  const csrf = /name="csrf" value="([^"]+)"/.exec(await page.body.text())![1];
  const r = await request(`${url}/ui/login`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", cookie: `sg_login=${csrf}` },
    body: new URLSearchParams({ csrf, username: "partner", password: TEST_PASSWORD }).toString(),
    dispatcher: uiAgent,
  });
  await r.body.text();
  const set = ([] as string[]).concat(r.headers["set-cookie"] ?? []);
  const session = set.map((c) => c.split(";")[0]).find((c) => c.startsWith("sg_session="));
  assert.ok(session, `logged in (${r.statusCode})`);
  return session;
}
