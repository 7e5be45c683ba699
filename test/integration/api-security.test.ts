// Attacks on the token endpoint, the admin path and the status page, against the real
// daemon over real HTTPS: a backtracking-bait Authorization header (on `sitegate run` as
// its own process with the unit's node flags, so its event loop is not the test's), password
// guessing per source and per username, RFC 6749 error order, token revocation, the admin
// allowlist, and the status page's cookie, log and listener hardening.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Writable } from "node:stream";
import { promisify } from "node:util";
import { Agent, request } from "undici";
import { stringify } from "yaml";
import { buildDaemon } from "../../src/daemon.js";
import { createLogger } from "../../src/log.js";
import type { ApiServer } from "../../src/api/server.js";
import type { UiPart } from "../../src/ui/part.js";
import type { ConfigInput } from "../../src/config/schema.js";
import { hashSecret } from "../../src/util/secret-hash.js";
import { withTmpDir } from "../support/tmp.js";
import { startGateway, configurePath, type Gateway } from "../support/gateway.js";
import { testConfig, testConfigInput, TEST_PASSWORD } from "../support/config.js";
import { testCert } from "../support/tls.js";
import { spawnDaemon } from "../support/daemon-process.js";
import { CLI } from "../support/site50.js";

const FORM = { "content-type": "application/x-www-form-urlencoded" };
const creds = (o: Record<string, string> = {}) => ({
  grant_type: "password",
  client_id: "partner-portal",
  username: "partner",
  password: TEST_PASSWORD,
  ...o,
});

async function withGateway(
  over: (dir: string) => Partial<ConfigInput>,
  fn: (gw: Gateway, dir: string) => Promise<void>,
  opts: { now?: () => number } = {},
): Promise<void> {
  await withTmpDir(async (dir) => {
    const gw = await startGateway(dir, over(dir), opts);
    try {
      await fn(gw, dir);
    } finally {
      await gw.stop();
    }
  });
}

test("ReDoS: Authorization headers of thousands of spaces are refused as they should be, and /healthz answers while they are handled", async () => {
  // How fast /healthz answers meanwhile is a benchmark row (test/bench/redos.bench.ts), not a bound here.
  await withTmpDir(async (dir) => {
    const d = await spawnDaemon(dir);
    const agent = new Agent({ connect: { ca: testCert().cert }, pipelining: 1 });
    try {
      const healthz = async () => {
        const r = await request(`${d.url}/healthz`, { dispatcher: agent });
        await r.body.text();
        return r.statusCode;
      };
      await healthz(); // the connection and TLS session are set up before the attack
      // 16,000 spaces: over the header cap; 7,000: parsed by the token route.
      const attack = [16_000, 16_000, 16_000, 7_000, 7_000, 7_000].map(async (n) => {
        try {
          const r = await request(`${d.url}/connect/token`, {
            method: "POST",
            headers: { ...FORM, authorization: `Basic${" ".repeat(n)}x y` },
            body: "grant_type=password",
            dispatcher: agent,
          });
          return { n, status: r.statusCode, body: await r.body.text() };
        } catch (e) {
          return { n, status: 0, body: String(e) }; // the server may close the connection after 431
        }
      });
      let done = false;
      const all = Promise.all(attack).finally(() => (done = true));
      const answers: number[] = [];
      while (!done || answers.length < 3) answers.push(await healthz());
      const results = await all;
      assert.ok(
        answers.every((s) => s === 200),
        `/healthz answered ${answers.join(", ")} while the headers were handled`,
      );
      for (const r of results.filter((x) => x.n === 7_000)) {
        assert.equal(r.status, 401, r.body);
        assert.equal(JSON.parse(r.body).error, "invalid_client");
      }
      for (const r of results.filter((x) => x.n === 16_000))
        assert.ok(r.status === 431 || r.status === 0, `over the header cap: ${r.status}`);
      assert.ok(d.alive());
    } finally {
      await agent.close();
      await d.stop();
    }
  });
});

test("the daemon warns at start when the config file can be read by other users", async () => {
  await withTmpDir(async (dir) => {
    const d = await spawnDaemon(dir, {}, { configMode: 0o644 });
    try {
      const warn = d.lines.find((l) => String(l.msg).startsWith("secrets readable by other users"));
      assert.ok(warn, `no warning in ${JSON.stringify(d.lines.map((l) => l.msg))}`);
      assert.equal(warn.file, d.configFile);
      assert.equal(warn.mode, "0644");
    } finally {
      await d.stop();
    }
  });
  await withTmpDir(async (dir) => {
    const d = await spawnDaemon(dir, {}, { configMode: 0o640 });
    try {
      assert.equal(d.lines.filter((l) => String(l.msg).startsWith("secrets readable")).length, 0);
    } finally {
      await d.stop();
    }
  });
});

test("guessing: the 11th wrong password in a minute from one address gets 429 with Retry-After, even with the right password", async () => {
  let now = Date.now();
  await withGateway(
    () => ({}),
    async (gw) => {
      for (let i = 0; i < 10; i++) {
        const r = await gw.call("POST", "/connect/token", { form: creds({ username: `user-${i}`, password: `guess-${i}` }) });
        assert.equal(r.status, 400, `attempt ${i + 1}: ${r.text}`);
        assert.equal(r.json.error, "invalid_grant");
      }
      const limited = await gw.call("POST", "/connect/token", { form: creds() });
      assert.equal(limited.status, 429, limited.text);
      const wait = Number(limited.headers["retry-after"]);
      assert.ok(wait > 0 && wait <= 60, `Retry-After ${wait}`);
      assert.equal(limited.json.error, "rate_limited");
      // Refused before the body is read: a malformed body gets the same answer.
      assert.equal((await gw.call("POST", "/connect/token", { headers: FORM, raw: "%%%" })).status, 429);
      now += 61_000;
      assert.equal((await gw.call("POST", "/connect/token", { form: creds() })).status, 200, "free again a minute later");
    },
    { now: () => now },
  );
});

test("guessing one username: exponential backoff per username, answered 429 with Retry-After; a success clears it", async () => {
  let now = Date.now();
  await withGateway(
    () => ({}),
    async (gw) => {
      for (let i = 0; i < 5; i++)
        assert.equal((await gw.call("POST", "/connect/token", { form: creds({ password: `guess-${i}` }) })).status, 400);
      const r = await gw.call("POST", "/connect/token", { form: creds({ password: "guess-5" }) });
      assert.equal(r.status, 400, "the 6th failure still reaches the password check and starts the backoff");
      const locked = await gw.call("POST", "/connect/token", { form: creds() });
      assert.equal(locked.status, 429, locked.text);
      assert.equal(locked.headers["retry-after"], "1");
      assert.equal(
        (await gw.call("POST", "/connect/token", { form: creds({ username: "other" }) })).json.error,
        "invalid_grant",
        "another username is not locked",
      );
      now += 1000;
      assert.equal((await gw.call("POST", "/connect/token", { form: creds({ password: "guess-6" }) })).status, 400);
      const twice = await gw.call("POST", "/connect/token", { form: creds() });
      assert.equal(twice.headers["retry-after"], "2", "the lock doubles");
      now += 2000;
      assert.equal((await gw.call("POST", "/connect/token", { form: creds() })).status, 200);
      assert.equal(
        (await gw.call("POST", "/connect/token", { form: creds({ password: "typo" }) })).status,
        400,
        "a success cleared the count: a typo is not locked",
      );
    },
    { now: () => now },
  );
});

test("RFC 6749 5.2: an unsupported grant_type is unsupported_grant_type, checked before the other fields", async () => {
  await withGateway(
    () => ({}),
    async (gw) => {
      const forms: Array<Record<string, string>> = [
        { grant_type: "client_credentials" },
        { grant_type: "authorization_code", code: "x" },
        { grant_type: "client_credentials", client_id: "nobody" },
      ];
      for (const form of forms) {
        const r = await gw.call("POST", "/connect/token", { form });
        assert.equal(r.status, 400, r.text);
        assert.equal(r.json.error, "unsupported_grant_type", JSON.stringify(form));
      }
      const missing = await gw.call("POST", "/connect/token", { form: { grant_type: "password" } });
      assert.equal(missing.json.error, "invalid_request");
    },
  );
});

test("a token dies when its user leaves the config or its password hash changes, and survives a plain restart", async () => {
  await withTmpDir(async (dir) => {
    const base = testConfigInput(dir);
    const configure = (gw: Gateway, token: string) =>
      gw.call("PUT", configurePath(), { headers: { authorization: `Bearer ${token}` }, body: { devices: [] } });
    /** The gateway on the same data dir with `over`, always stopped. */
    const run = async (over: Partial<ConfigInput>, fn: (gw: Gateway) => Promise<void>) => {
      const gw = await startGateway(dir, over);
      try {
        await fn(gw);
      } finally {
        await gw.stop();
      }
    };
    let token = "";
    await run({}, async (gw) => {
      token = await gw.token();
      assert.equal((await configure(gw, token)).status, 400, "valid (the empty body is what is refused)");
    });
    await run({}, async (gw) => assert.equal((await configure(gw, token)).status, 400, "still valid after a restart with the same users"));
    await run(
      { auth: { ...base.auth, users: [{ username: "someone-else", password_hash: base.auth.users![0].password_hash }] } },
      async (gw) => {
        const r = await configure(gw, token);
        assert.equal(r.status, 401, r.text);
        assert.match(String(r.headers["www-authenticate"]), /invalid_token/);
        assert.match(r.json.message, /revoked/);
      },
    );
    await run({}, async (gw) => assert.equal((await configure(gw, token)).status, 401, "and stays dead when the user comes back"));
    await run({}, async (gw) => {
      token = await gw.token();
      assert.equal((await configure(gw, token)).status, 400);
    });
    await run({ auth: { ...base.auth, users: [{ username: "partner", password_hash: hashSecret("a-new-password") }] } }, async (gw) => {
      assert.equal((await configure(gw, token)).status, 401, "password changed");
    });
  });
});

test("`sitegate token revoke --all` ends every issued token while the daemon runs", async () => {
  await withGateway(
    () => ({}),
    async (gw, dir) => {
      const file = join(dir, "config.yaml");
      writeFileSync(file, stringify(testConfigInput(dir)), { mode: 0o600 });
      const tokens = [await gw.token(), await gw.token()];
      const configure = (t: string) =>
        gw.call("PUT", configurePath(), { headers: { authorization: `Bearer ${t}` }, body: { devices: [] } });
      for (const t of tokens) assert.equal((await configure(t)).status, 400);
      const run = promisify(execFile);
      const list = await run(process.execPath, [CLI, "token", "list", "--config", file, "--json"]);
      assert.equal(JSON.parse(list.stdout).users[0].tokens, 2);
      const out = await run(process.execPath, [CLI, "token", "revoke", "--all", "--config", file]);
      assert.match(out.stdout, /revoked 2 token\(s\)/);
      for (const t of tokens) assert.equal((await configure(t)).status, 401);
      assert.equal((await configure(await gw.token())).status, 400, "a new token works");
      await assert.rejects(
        run(process.execPath, [CLI, "token", "revoke", "--config", file]),
        (e: { code?: number; stderr?: string }) => e.code === 2 && /--all or --user/.test(e.stderr ?? ""),
      );
    },
  );
});

test("auth.admin_allowlist: /connect/token and /gateway/admin/ from a source outside it get 403; the webhooks keep ip_allowlist", async () => {
  await withGateway(
    (dir) => ({ auth: { ...testConfigInput(dir).auth, admin_allowlist: ["192.0.2.0/24", "2001:db8::/32"] } }),
    async (gw) => {
      const token = await gw.call("POST", "/connect/token", { form: creds() });
      assert.equal(token.status, 403, token.text);
      assert.match(token.json.error_description, /admin allowlist/);
      for (const headers of [{}, { authorization: "Bearer not-a-token" }] as Array<Record<string, string>>) {
        const r = await gw.call("PUT", configurePath(), { headers, body: { devices: [] } });
        assert.equal(r.status, 403, r.text);
        assert.equal(r.json.error, "forbidden");
      }
      assert.equal((await gw.deviceSync()).status, 200);
    },
  );
  // Default: the same list as the webhooks.
  await withGateway(
    (dir) => ({ auth: { ...testConfigInput(dir).auth, ip_allowlist: ["192.0.2.0/24"] } }),
    async (gw) => {
      assert.equal((await gw.call("POST", "/connect/token", { form: creds() })).status, 403);
    },
  );
});

/** The daemon in this process with a logger whose lines the test reads. */
async function withLoggedGateway(
  over: Partial<ConfigInput>,
  fn: (urls: { api: string; ui: string }, logs: string[]) => Promise<void>,
): Promise<void> {
  await withTmpDir(async (dir) => {
    const logs: string[] = [];
    const sink = new Writable({
      write(chunk, _enc, cb) {
        logs.push(String(chunk));
        cb();
      },
    });
    const daemon = buildDaemon(testConfig(dir, { ...over, log_level: "info" }), createLogger({ level: "info", destination: sink }));
    await daemon.start();
    try {
      const api = daemon.part<ApiServer>("api").url;
      const ui = daemon.part<UiPart>("ui");
      await fn({ api, ui: over.ui?.listen ? ui.url : api }, logs);
    } finally {
      await daemon.stop();
    }
  });
}

const uiAgent = new Agent({ connect: { ca: testCert().cert } });
async function get(url: string, headers: Record<string, string> = {}) {
  const r = await request(url, { headers, dispatcher: uiAgent });
  return { status: r.statusCode, headers: r.headers, text: await r.body.text() };
}

test("status page: `Cookie: a=%` gets the normal answer, no 500 and no logged stack", async () => {
  await withLoggedGateway({ ui: { enabled: true } }, async ({ ui }, logs) => {
    for (const cookie of ["a=%", "sg_session=%E0%A4%A", "sg_login=%; a=%zz"]) {
      assert.equal((await get(`${ui}/ui/login`, { cookie })).status, 200, cookie);
      assert.equal((await get(`${ui}/ui/`, { cookie })).status, 303, cookie);
      assert.equal((await get(`${ui}/ui/api/overview`, { cookie })).status, 401, cookie);
    }
    assert.deepEqual(
      logs.filter((l) => /"level":50/.test(l)),
      [],
      "nothing logged as an error",
    );
  });
});

test("status page: a failed login logs the source, never the typed username", async () => {
  await withLoggedGateway({ ui: { enabled: true } }, async ({ ui }, logs) => {
    const page = await get(`${ui}/ui/login`);
    const csrf = /name="csrf" value="([^"]+)"/.exec(page.text)![1];
    const typed = "Tr0ub4dor-typed-in-the-user-field";
    const r = await request(`${ui}/ui/login`, {
      method: "POST",
      headers: { ...FORM, cookie: `sg_login=${csrf}` },
      body: new URLSearchParams({ csrf, username: typed, password: "wrong" }).toString(),
      dispatcher: uiAgent,
    });
    await r.body.text();
    assert.equal(r.statusCode, 401);
    const refused = logs.filter((l) => l.includes("status page login refused"));
    assert.equal(refused.length, 1, logs.join(""));
    assert.match(refused[0], /"ip":"127\.0\.0\.1"/);
    assert.deepEqual(
      logs.filter((l) => l.includes(typed)),
      [],
    );
  });
});

test("status page on its own listener (ui.listen) is rate limited per source like the API", async () => {
  const base = testConfigInput("/x");
  await withLoggedGateway(
    { ui: { enabled: true, listen: "127.0.0.1:0" }, http: { ...base.http, rate_limit_per_min: 5 } },
    async ({ ui, api }) => {
      assert.notEqual(ui, api);
      const statuses: number[] = [];
      for (let i = 0; i < 6; i++) statuses.push((await get(`${ui}/ui/login`)).status);
      assert.deepEqual(statuses, [200, 200, 200, 200, 200, 429]);
      const limited = await get(`${ui}/ui/login`);
      assert.ok(Number(limited.headers["retry-after"]) > 0);
    },
  );
});
