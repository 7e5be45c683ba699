// Password guessing against the real daemon over real HTTPS (DESIGN B3): attempts are
// counted before the asynchronous scrypt check, so guesses sent all at once meet the same
// limits as guesses sent one by one, and the token endpoint and the status page login lock
// a username each for itself (the page cannot lock the partner out). How many passwords were really checked is read from the daemon's
// own counter (sitegate_password_checks_total), not guessed from timing.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Agent, request } from "undici";
import type { ConfigInput } from "../../src/config/schema.js";
import { TOKEN_IP_FAILURES } from "../../src/api/token.js";
import { USER_FREE_FAILURES } from "../../src/api/guess-limit.js";
import { withTmpDir } from "../support/tmp.js";
import { startGateway, type Gateway } from "../support/gateway.js";
import { testCert } from "../support/tls.js";
import { TEST_PASSWORD } from "../support/config.js";

const FORM = "application/x-www-form-urlencoded";
const LOOPBACK_8 = ["127.0.0.0/8"];

/** The throttles' clock stands still: a lock cannot run out while a slow machine gets to the next request. */
const frozen = Date.now();

async function withGateway(over: Partial<ConfigInput>, fn: (gw: Gateway) => Promise<void>): Promise<void> {
  await withTmpDir(async (dir) => {
    const gw = await startGateway(dir, over, { now: () => frozen });
    try {
      await fn(gw);
    } finally {
      await gw.stop();
    }
  });
}

const agents = new Map<string, Agent>();
function from(ip: string): Agent {
  let a = agents.get(ip);
  if (!a) {
    a = new Agent({ connect: { ca: testCert().cert }, localAddress: ip });
    agents.set(ip, a);
  }
  return a;
}

async function post(gw: Gateway, path: string, body: Record<string, string>, ip = "127.0.0.1", cookie?: string) {
  const r = await request(`${gw.url}${path}`, {
    method: "POST",
    headers: { "content-type": FORM, ...(cookie ? { cookie } : {}) },
    body: new URLSearchParams(body).toString(),
    dispatcher: from(ip),
  });
  const text = await r.body.text();
  return { status: r.statusCode, text, setCookie: ([] as string[]).concat(r.headers["set-cookie"] ?? []) };
}

const token = (gw: Gateway, username: string, password: string, ip?: string) =>
  post(gw, "/connect/token", { grant_type: "password", client_id: "partner-portal", username, password }, ip);

/** The login form's CSRF token and cookie, then the login itself. */
async function uiLogin(gw: Gateway, username: string, password: string, ip = "127.0.0.1") {
  const page = await request(`${gw.url}/ui/login`, { dispatcher: from(ip) });
  const html = await page.body.text();
  const csrf = /name="csrf" value="([^"]+)"/.exec(html)![1];
  return post(gw, "/ui/login", { csrf, username, password }, ip, `sg_login=${csrf}`);
}

async function checked(gw: Gateway): Promise<number> {
  const m = /^sitegate_password_checks_total (\d+)$/m.exec((await gw.call("GET", "/metrics")).text);
  assert.ok(m, "the daemon counts its password checks");
  return Number(m[1]);
}

const count = (rs: Array<{ status: number }>, status: number) => rs.filter((r) => r.status === status).length;
const ui = { enabled: true, allow: LOOPBACK_8 };

test("40 parallel wrong passwords for one username at /connect/token: only the username's free failures and one more are checked", async () => {
  await withGateway({}, async (gw) => {
    const before = await checked(gw);
    const rs = await Promise.all(Array.from({ length: 40 }, () => token(gw, "partner", "wrong")));
    const n = (await checked(gw)) - before;
    assert.equal(n, USER_FREE_FAILURES + 1, `passwords checked: ${n}`);
    assert.equal(count(rs, 400), n);
    assert.equal(count(rs, 429), 40 - n);
  });
});

test("40 parallel wrong passwords for 40 usernames from one source at /connect/token: at most the source's 10 are checked", async () => {
  await withGateway({}, async (gw) => {
    const before = await checked(gw);
    const rs = await Promise.all(Array.from({ length: 40 }, (_, i) => token(gw, `user-${i}`, "wrong")));
    const n = (await checked(gw)) - before;
    assert.equal(n, TOKEN_IP_FAILURES, `passwords checked: ${n}`);
    assert.equal(count(rs, 429), 40 - n);
  });
});

test("40 parallel wrong status page logins from one source: at most the source's 5 are checked", async () => {
  await withGateway({ ui }, async (gw) => {
    const page = await request(`${gw.url}/ui/login`, { dispatcher: from("127.0.0.1") });
    const csrf = /name="csrf" value="([^"]+)"/.exec(await page.body.text())![1];
    const before = await checked(gw);
    const rs = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        post(gw, "/ui/login", { csrf, username: `user-${i}`, password: "wrong" }, "127.0.0.1", `sg_login=${csrf}`),
      ),
    );
    const n = (await checked(gw)) - before;
    assert.equal(n, 5, `passwords checked: ${n}`);
    assert.equal(count(rs, 401), n);
    assert.equal(count(rs, 429), 40 - n);
  });
});

test("12 failed status page logins for partner never lock the token endpoint: the right password from 127.0.0.1 gets its token; the page keeps its own lock", async () => {
  await withGateway({ ui }, async (gw) => {
    // Wrong logins at the page from sources the page allows but the admin allowlist does not
    // (each source's own limit of 5 stays unreached).
    const statuses: number[] = [];
    for (let i = 0; i < 12; i++) statuses.push((await uiLogin(gw, "partner", "wrong", `127.0.0.${2 + (i % 4)}`)).status);
    assert.deepEqual(statuses.slice(0, USER_FREE_FAILURES + 1), Array(USER_FREE_FAILURES + 1).fill(401));
    assert.ok(
      statuses.slice(USER_FREE_FAILURES + 1).every((s) => s === 429),
      `the page locks the username for itself: ${statuses}`,
    );
    const t = await token(gw, "partner", TEST_PASSWORD, "127.0.0.1");
    assert.equal(t.status, 200, t.text);
    assert.match(t.text, /access_token/);
  });
  await withGateway({ ui }, async (gw) => {
    // The other way round: guesses at the token endpoint lock it, not the page.
    for (let i = 0; i <= USER_FREE_FAILURES; i++) assert.equal((await token(gw, "partner", "wrong", "127.0.0.1")).status, 400);
    assert.equal((await token(gw, "partner", TEST_PASSWORD, "127.0.0.1")).status, 429);
    const l = await uiLogin(gw, "partner", TEST_PASSWORD, "127.0.0.2");
    assert.equal(l.status, 303, "the page takes the right password");
  });
});
