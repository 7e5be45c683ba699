// Every row of DESIGN B3's status table, and the token endpoint of RFC 6749, over HTTPS.
import { test } from "node:test";
import assert from "node:assert/strict";
import Database from "better-sqlite3";
import { join } from "node:path";
import { configurePath, tcpDevice, withGateway, withSiteGateway, type Gateway } from "../support/gateway.js";
import { tcpScenario } from "../support/site.js";
import { event } from "../support/dispatch.js";
import { readDb } from "../support/db.js";
import { testConfigInput, TEST_PASSWORD } from "../support/config.js";
import type { StoragePart } from "../../src/storage/part.js";

const SYNC = "/v1/api/gateway/site-001/devicesync";
const form = (over: Record<string, string> = {}) => ({
  grant_type: "password",
  client_id: "partner-portal",
  username: "partner",
  password: TEST_PASSWORD,
  ...over,
});

function assertErrorBody(r: { json: any }, code: string): void {
  assert.equal(r.json?.error, code, JSON.stringify(r.json));
  assert.equal(typeof r.json.message, "string");
  assert.ok(Array.isArray(r.json.details));
}

test("token: success, then RFC 6749 errors for each kind of bad request", async () => {
  await withGateway(async (gw) => {
    const ok = await gw.call("POST", "/connect/token", { form: form() });
    assert.equal(ok.status, 200);
    assert.equal(ok.json.token_type, "Bearer");
    assert.equal(ok.json.expires_in, 3600);
    assert.match(ok.json.access_token, /^[A-Za-z0-9_-]{40,}$/);
    assert.equal(ok.headers["cache-control"], "no-store");

    const bad = async (f: Record<string, string>, status: number, error: string) => {
      const r = await gw.call("POST", "/connect/token", { form: f });
      assert.equal(r.status, status, r.text);
      assert.equal(r.json.error, error);
      assert.equal(typeof r.json.error_description, "string");
    };
    await bad(form({ password: "wrong" }), 400, "invalid_grant");
    await bad(form({ username: "nobody" }), 400, "invalid_grant");
    await bad(form({ client_id: "someone-else" }), 401, "invalid_client");
    await bad(form({ grant_type: "client_credentials" }), 400, "unsupported_grant_type");
    const { password: _p, ...noPassword } = form();
    await bad(noPassword, 400, "invalid_request");
    const json = await gw.call("POST", "/connect/token", { body: form() });
    assert.equal(json.status, 415);
  });
});

test("tokens are stored only as hashes", async () => {
  await withGateway(async (gw, dir) => {
    const token = await gw.token();
    const rows = readDb(dir, (db) => db.prepare("SELECT hash FROM api_token").pluck().all() as string[]);
    assert.equal(rows.length, 1);
    assert.notEqual(rows[0], token);
    assert.ok(!rows[0].includes(token));
  });
});

test("a token expires after its lifetime", async () => {
  let now = Date.now();
  await withGateway(
    async (gw) => {
      const token = await gw.token();
      const put = () => gw.call("PUT", configurePath(), { headers: { authorization: `Bearer ${token}` }, body: { devices: [] } });
      assert.equal((await put()).status, 400, "the token works (the empty body is what is refused)");
      now += 3601 * 1000;
      const r = await put();
      assert.equal(r.status, 401);
      assertErrorBody(r, "unauthorized");
      assert.match(String(r.headers["www-authenticate"]), /^Bearer .*invalid_token/);
      assert.match(r.json.message, /expired/);
    },
    {},
    { now: () => now },
  );
});

test("401: no or wrong API key, no or wrong bearer token", async () => {
  await withGateway(async (gw) => {
    for (const headers of [{}, { "x-api-key": "nope" }] as Array<Record<string, string>>) {
      const r = await gw.call("GET", SYNC, { headers });
      assert.equal(r.status, 401);
      assertErrorBody(r, "unauthorized");
    }
    for (const headers of [{}, { authorization: "Bearer not-a-token" }, { authorization: "Basic abc" }] as Array<Record<string, string>>) {
      const r = await gw.call("PUT", configurePath(), { headers, body: { devices: [] } });
      assert.equal(r.status, 401);
      assertErrorBody(r, "unauthorized");
      assert.match(String(r.headers["www-authenticate"]), /^Bearer/);
    }
  });
});

test("403: a source address not on the allowlist; an organizationId that is not ours", async () => {
  await withGateway(
    async (gw) => {
      const r = await gw.call("GET", SYNC, { headers: gw.apiKeyHeaders });
      assert.equal(r.status, 403);
      assertErrorBody(r, "forbidden");
      assert.match(r.json.message, /allowlist/);
    },
    (dir) => ({ auth: { ...testConfigInput(dir).auth, ip_allowlist: ["192.0.2.0/24", "2001:db8::/32"] } }),
  );
  await withGateway(async (gw) => {
    const token = await gw.token();
    const r = await gw.call("PUT", configurePath("00000000-0000-4000-8000-000000000000"), {
      headers: { authorization: `Bearer ${token}` },
      body: { devices: [] },
    });
    assert.equal(r.status, 403);
    assertErrorBody(r, "forbidden");
  });
});

test("404: another site, another API version, another moleculeId, an unknown route", async () => {
  await withGateway(async (gw) => {
    for (const path of ["/v1/api/gateway/site-999/devicesync", "/v2/api/gateway/site-001/devicesync"]) {
      const r = await gw.call("GET", path, { headers: gw.apiKeyHeaders });
      assert.equal(r.status, 404, path);
      assertErrorBody(r, "not_found");
    }
    const token = await gw.token();
    const r = await gw.call("PUT", configurePath(undefined, "site-999"), {
      headers: { authorization: `Bearer ${token}` },
      body: { devices: [] },
    });
    assert.equal(r.status, 404);
    const nowhere = await gw.call("GET", "/nowhere");
    assert.equal(nowhere.status, 404);
    assertErrorBody(nowhere, "not_found");
  });
});

test("400: every invalid configure body is refused whole with paths, and nothing is stored", async () => {
  await withGateway(async (gw) => {
    const auth = { authorization: `Bearer ${await gw.token()}` };
    const good = {
      device_id: "m1",
      device_type: "modbus",
      device_integration: "6f1c2a4e-8d3b-4c5a-9e7f-0a1b2c3d4e5f/sunspec",
      mb_type: 2,
      mb_device_type: 1,
      mb_ip: "127.0.0.1",
      mb_port: 1502,
    };
    const cases: Array<[unknown, string]> = [
      [{ devices: [{ ...good, mb_ip: undefined }] }, "devices[0].mb_ip"],
      [{ devices: [{ ...good, mb_type: 1 }] }, "devices[0].mb_slave_id"],
      [
        { devices: [{ ...good, device_integration: "6f1c2a4e-8d3b-4c5a-9e7f-0a1b2c3d4e5f/no-such-thing" }] },
        "devices[0].device_integration",
      ],
      [{ devices: [good, { ...good, mb_ip: "127.0.0.2" }] }, "devices[1].device_id"],
      [
        { devices: [{ ...good, mb_check_write: [{ reg_cmd_id: 1, reg_fun: 16, reg_reg: 1, reg_value: 1 }] }] },
        "devices[0].mb_check_write[0].reg_fun",
      ],
      [{ devices: [{ ...good, surprise: 1 }] }, "devices[0].surprise"],
      [{ devices: Array.from({ length: 65 }, (_, i) => ({ ...good, device_id: `d${i}` })) }, "devices"],
      [{ devices: [] }, "devices"],
    ];
    for (const [body, path] of cases) {
      const r = await gw.call("PUT", configurePath(), { headers: auth, body });
      assert.equal(r.status, 400, `${path}: ${r.text}`);
      assertErrorBody(r, "invalid_request");
      assert.ok(
        r.json.details.some((d: { path: string }) => d.path === path),
        `${path} not in ${JSON.stringify(r.json.details)}`,
      );
    }
    const broken = await gw.call("PUT", configurePath(), { headers: { ...auth, "content-type": "application/json" }, raw: "{not json" });
    assert.equal(broken.status, 400);
    assertErrorBody(broken, "invalid_request");
    const sync = await gw.call("GET", SYNC, { headers: gw.apiKeyHeaders });
    assert.deepEqual(sync.json.devices, []);
  });
});

test("413 for a body over 256 KiB, 415 for a wrong content type", async () => {
  await withGateway(async (gw) => {
    const auth = { authorization: `Bearer ${await gw.token()}` };
    const big = await gw.call("PUT", configurePath(), {
      headers: { ...auth, "content-type": "application/json" },
      raw: JSON.stringify({ devices: [], pad: "x".repeat(300 * 1024) }),
    });
    assert.equal(big.status, 413, big.text);
    assertErrorBody(big, "payload_too_large");
    const text = await gw.call("PUT", configurePath(), { headers: { ...auth, "content-type": "text/plain" }, raw: "hello" });
    assert.equal(text.status, 415, text.text);
    assertErrorBody(text, "unsupported_media_type");
    const formBody = await gw.call("PUT", configurePath(), { headers: auth, form: { devices: "[]" } });
    assert.equal(formBody.status, 415);
  });
});

test("429 with Retry-After once a source exceeds its rate", async () => {
  await withGateway(
    async (gw) => {
      const statuses: number[] = [];
      let limited: Awaited<ReturnType<Gateway["call"]>> | null = null;
      let first: Awaited<ReturnType<Gateway["call"]>> | undefined;
      for (let i = 0; i < 8; i++) {
        const r = await gw.call("GET", SYNC, { headers: gw.apiKeyHeaders });
        statuses.push(r.status);
        first ??= r;
        if (r.status === 429) limited = r;
      }
      assert.deepEqual(statuses.slice(0, 5), [200, 200, 200, 200, 200]);
      assert.ok(limited, `no 429 in ${statuses}`);
      assertErrorBody(limited!, "rate_limited");
      assert.ok(Number(limited!.headers["retry-after"]) > 0);
      // The x-ratelimit-* headers ride on the 429 only, not on every answer.
      assert.equal(limited!.headers["x-ratelimit-limit"], "5");
      assert.equal(limited!.headers["x-ratelimit-remaining"], "0");
      assert.equal(first!.headers["x-ratelimit-limit"], undefined, JSON.stringify(first!.headers));
    },
    { http: { listen: "127.0.0.1:0", tls: (await import("../support/config.js")).testConfigInput("/x").http.tls, rate_limit_per_min: 5 } },
  );
});

test("503 when storage cannot commit, and nothing is acknowledged", async () => {
  await withGateway(async (gw, dir) => {
    // Another connection holds the write lock: the gateway's commit times out (busy).
    const locker = new Database(join(dir, "sitegate.db"));
    locker.exec("BEGIN EXCLUSIVE");
    try {
      const r = await gw.call("POST", "/connect/token", { form: form() });
      assert.equal(r.status, 503, r.text);
      assertErrorBody(r, "unavailable");
    } finally {
      locker.exec("ROLLBACK");
      locker.close();
    }
    assert.equal((await gw.call("POST", "/connect/token", { form: form() })).status, 200, "back once storage is");
  });
});

test("a read-only database answers 503 unavailable (STORAGE_UNAVAILABLE from storage, not SQLite text at the front end), and the same requests succeed once it can commit", async () => {
  await withGateway(async (gw) => {
    // The gateway's own connection, made unable to commit by SQLite itself.
    const db = gw.daemon.part<StoragePart>("storage").db;
    const ev = event({ event_id: "5b1d3b5f-9e4c-4d6b-8f80-1b2c3d4e5f60", event_quantity: 1 }, 3_600_000, 600_000);
    const dr = () =>
      gw.call("POST", "/v1/api/gateway/site-001/dr", { body: { mode: "live", event_slots: [ev] }, headers: gw.apiKeyHeaders });
    const refused = async () => {
      for (const r of [await gw.call("POST", "/connect/token", { form: form() }), await dr()]) {
        assert.equal(r.status, 503, r.text);
        assert.match(r.text, /nothing was stored/);
      }
      assertErrorBody(await dr(), "unavailable");
    };
    db.pragma("query_only = ON"); // SQLITE_READONLY on every write (a full disk is in test/unit/error-hierarchy.test.ts)
    try {
      await refused();
    } finally {
      db.pragma("query_only = OFF");
    }
    assert.equal((await gw.call("POST", "/connect/token", { form: form() })).status, 200);
    const again = await dr();
    assert.equal(again.status, 200, again.text);
    assert.deepEqual(again.json, [{ event_id: ev.event_id, status: "accepted" }]);
  });
});

test("healthz, metrics and the OpenAPI document", async () => {
  await withGateway(async (gw) => {
    const h = await gw.call("GET", "/healthz");
    assert.equal(h.status, 200);
    assert.equal(h.json.status, "ok");
    assert.equal(h.json.site_id, "site-001");
    const m = await gw.call("GET", "/metrics");
    assert.equal(m.status, 200);
    assert.match(String(m.headers["content-type"]), /^text\/plain/);
    assert.match(m.text, /^# TYPE sitegate_samples_dropped_total counter$/m);
    assert.match(m.text, /^sitegate_samples_pending_snapshots 0$/m);
    const o = await gw.call("GET", "/openapi.json");
    assert.equal(o.status, 200);
    assert.equal(o.json.openapi, "3.1.0");
    const body = o.json.paths["/gateway/admin/device/configure"].put.requestBody.content["application/json"].schema;
    assert.equal(body.properties.devices.maxItems, 64, "generated from the zod schema that validates");
    // One entry is the pairing family's (its connector's schema): the Modbus device entry, RTU or TCP.
    const entry = JSON.stringify(body.properties.devices.items);
    for (const field of ["device_integration", "mb_type", "mb_slave_id", "mb_rtu_no", "mb_ip", "reg_cmd_id"])
      assert.ok(entry.includes(`"${field}"`), `the configure entry's schema names ${field}`);
    assert.ok(o.json.paths["/v1/api/gateway/{site_id}/devicesync"]);
  });
});

test("/dr and configure answer 503 and store nothing while SQLite cannot commit; the same requests succeed afterwards", async () => {
  await withSiteGateway(
    tcpScenario(),
    () => ({}),
    async (site, gw, dir) => {
      const auth = { authorization: `Bearer ${await gw.token()}` }; // issuing a token commits too
      const ev = event({ event_id: "3a0c2a4e-8d3b-4c5a-9e7f-0a1b2c3d4e5f", event_quantity: 1 }, 3_600_000, 600_000);
      const dr = () =>
        gw.call("POST", "/v1/api/gateway/site-001/dr", { body: { mode: "live", event_slots: [ev] }, headers: gw.apiKeyHeaders });
      const configure = () => gw.configure([tcpDevice("grid-1", site.tcpPorts[0], 3)], auth);
      const stored = () =>
        readDb(dir, (db) => ({
          events: db.prepare("SELECT count(*) FROM dp_event").pluck().get(),
          devices: db.prepare("SELECT count(*) FROM dv_device").pluck().get(),
        }));
      // Another connection holds the write lock: the gateway's commits time out (busy).
      const locker = new Database(join(dir, "sitegate.db"));
      locker.exec("BEGIN IMMEDIATE");
      try {
        const r = await dr();
        assert.equal(r.status, 503, r.text);
        assertErrorBody(r, "unavailable");
        assert.match(r.json.message, /nothing was stored/);
        const c = await configure();
        assert.equal(c.status, 503, c.text);
        assertErrorBody(c, "unavailable");
      } finally {
        locker.exec("ROLLBACK");
        locker.close();
      }
      assert.deepEqual(stored(), { events: 0, devices: 0 }, "nothing was stored");
      const sync = await gw.deviceSync();
      assert.deepEqual(sync.json.devices, [], "device sync lists nothing");
      // Storage is back: the very same requests are new to the gateway, not replays.
      const again = await dr();
      assert.equal(again.status, 200, again.text);
      assert.deepEqual(again.json, [{ event_id: ev.event_id, status: "accepted" }]);
      const conf = await configure();
      assert.equal(conf.status, 200, conf.text);
      assert.equal(conf.json.devices[0].status, "accepted");
      assert.deepEqual(stored(), { events: 1, devices: 1 });
    },
  );
});
