// Updates from the fleet: the `update` command over a real mosquitto leaves a request in the
// data dir (the daemon cannot install anything), `sitegate update apply-request` (root's
// unit, run here directly) carries it out over real HTTPS with the sha256 and version pinned,
// and the retained status topic carries the running version and the last outcome.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash, generateKeyPairSync } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, readlinkSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { createServer } from "node:https";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { startGateway, type Gateway } from "../support/gateway.js";
import { until } from "../support/wait.js";
import { command, fleetClient, fleetConfig, record, withBroker } from "../support/mosquitto.js";
import { fakeBundle, requestConfig, updateAsync, withInstalled, type UpdateEnv } from "../support/ota.js";
import { testCert } from "../support/tls.js";
import type { Fleet } from "../../src/fleet/fleet.js";
import type { Part } from "../../src/lifecycle.js";

const fleetOf = (gw: Gateway) => gw.daemon.part<Part & { current: Fleet | null }>("fleet").current as unknown as { connected: boolean };
const sha256 = (file: string) => createHash("sha256").update(readFileSync(file)).digest("hex");

/** Serves files over HTTPS with the test certificate; the CLI trusts it through NODE_EXTRA_CA_CERTS. */
async function serve(files: Record<string, string>): Promise<{ url: (name: string) => string; close(): void }> {
  const cert = testCert();
  const server = createServer({ cert: cert.cert, key: cert.key }, (req, res) => {
    const f = files[req.url ?? ""];
    if (f) res.end(readFileSync(f));
    else res.writeHead(404).end();
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  return { url: (name) => `https://127.0.0.1:${port}${name}`, close: () => server.close() };
}

const applyRequest = (env: UpdateEnv, config: string) =>
  updateAsync(env, ["apply-request", "--config", config], { NODE_EXTRA_CA_CERTS: testCert().certFile });

test("fleet update: bad requests get 400 and write nothing; a request is written before its 202, a second one gets 409; apply-request installs it with its sha256 pinned; the status topic shows the outcome", async () => {
  await withInstalled(async (env, dir) => {
    const good = await fakeBundle({ version: "0.2.0", mode: "healthy", key: env.keys.privateKey, out: join(dir, "v020.bundle") });
    const other = await fakeBundle({ version: "0.3.0", mode: "healthy", key: env.keys.privateKey, out: join(dir, "v030.bundle") });
    const web = await serve({ "/0.2.0.bundle": good, "/0.3.0.bundle": other });
    // a bench: fleet commands are not signed here, which the config has to allow
    const update = { allowed_urls: [web.url("/")], allow_unsigned_requests: true };
    const config = requestConfig(env, dir, update);
    const before = process.env.SITEGATE_ROOT;
    process.env.SITEGATE_ROOT = env.root; // where the daemon reads the last outcome for its status
    const requestFile = join(env.dataDir, "update", "request.json");
    try {
      await withBroker(dir, async (broker) => {
        let gw = await startGateway(env.dataDir, { fleet: fleetConfig(broker), update });
        const cl = await fleetClient(broker);
        const seen = record(cl);
        await cl.subscribeAsync("sitegate/site-001/status", { qos: 1 });
        const statusOf = (m: { topic: string; json: unknown }) => (m.topic === "sitegate/site-001/status" ? (m.json as any) : null);
        try {
          await until(() => fleetOf(gw).connected, "gateway connected");
          await until(
            async () =>
              (await Promise.race([command(cl, "site-001", "ping", undefined), new Promise((r) => setTimeout(() => r(null), 1000))])) !==
              null,
            "the gateway answers",
          );

          const bad = [
            { url: web.url("/0.2.0.bundle").replace("https:", "http:"), sha256: sha256(good), version: "0.2.0" },
            { url: web.url("/0.2.0.bundle"), sha256: "abc", version: "0.2.0" },
            { url: web.url("/0.2.0.bundle"), sha256: sha256(good), version: "two" },
            { url: web.url("/0.2.0.bundle"), sha256: sha256(good), version: "0.2.0", extra: true },
          ];
          for (const b of bad) {
            const r = await command(cl, "site-001", "update", b);
            assert.equal(r.json.status, 400, JSON.stringify(r.json));
            assert.equal(r.json.error, "invalid_request");
            assert.ok(r.json.details.length >= 1);
            assert.equal(existsSync(requestFile), false, "a refused request leaves nothing");
          }

          // A URL outside update.allowed_urls: 403 from the daemon, nothing written.
          const outside = await command(cl, "site-001", "update", {
            url: "https://elsewhere.example/sitegate/0.2.0.bundle",
            sha256: sha256(good),
            version: "0.2.0",
          });
          assert.equal(outside.json.status, 403, JSON.stringify(outside.json));
          assert.equal(outside.json.details[0].path, "url");
          assert.match(outside.json.message, /not under update\.allowed_urls/);
          assert.equal(existsSync(requestFile), false);

          // A sha256 that is not the bundle's: requested, then refused by root; nothing changes.
          const wrong = await command(cl, "site-001", "update", { url: web.url("/0.2.0.bundle"), sha256: sha256(other), version: "0.2.0" });
          assert.equal(wrong.json.status, 202, JSON.stringify(wrong.json));
          assert.ok(existsSync(requestFile), "the request is on disk when the answer leaves");
          const dup = await command(cl, "site-001", "update", { url: web.url("/0.3.0.bundle"), sha256: sha256(other), version: "0.3.0" });
          assert.equal(dup.json.status, 409, "one request at a time");
          const releases = () => readdirSync(join(env.root, "releases")).sort().join(",");
          const releasesBefore = releases();
          let r = await applyRequest(env, config);
          assert.equal(r.code, 2, r.out);
          assert.match(r.out, /sha256 is [0-9a-f]{64}, the request asked for/);
          assert.equal(existsSync(requestFile), false, "taken in, whatever the outcome");
          assert.equal(readlinkSync(join(env.root, "current")), "releases/0.1.0");
          const refused = JSON.parse(readFileSync(join(env.root, "state", "update.json"), "utf8")).last;
          assert.equal(refused.result, "refused");
          assert.equal(releases(), releasesBefore, "no release added");

          // The right one is installed.
          const ok = await command(cl, "site-001", "update", {
            url: web.url("/0.2.0.bundle"),
            sha256: sha256(good).toUpperCase(),
            version: "0.2.0",
          });
          assert.equal(ok.json.status, 202, JSON.stringify(ok.json));
          assert.deepEqual(ok.json.data, { status: "requested", version: "0.2.0" });
          r = await applyRequest(env, config);
          assert.equal(r.code, 0, r.out);
          assert.equal(readlinkSync(join(env.root, "current")), "releases/0.2.0");
          r = await applyRequest(env, config);
          assert.equal(r.code, 0, r.out);
          assert.match(r.out, /no update request/);

          // The status topic: the version that runs, and the last outcome (the refusal; the
          // install is pending until its health check).
          await gw.stop();
          gw = await startGateway(env.dataDir, { fleet: fleetConfig(broker), update });
          await until(
            () => seen.some((m) => statusOf(m)?.state === "online" && statusOf(m)?.last_update?.result === "refused"),
            "status with the last update outcome",
          );
          const st = statusOf([...seen].reverse().find((m) => statusOf(m)?.state === "online")!);
          assert.equal(typeof st.version, "string");
          assert.equal(st.last_update.version, "0.2.0");
          assert.match(st.last_update.reason, /sha256/);
        } finally {
          await cl.endAsync();
          await gw.stop();
        }
      });
    } finally {
      web.close();
      if (before === undefined) delete process.env.SITEGATE_ROOT;
      else process.env.SITEGATE_ROOT = before;
    }
  });
});

test("apply-request follows no link: a symlinked request file is refused and removed, its target untouched", async () => {
  await withInstalled(async (env, dir) => {
    const target = join(dir, "elsewhere.json");
    writeFileSync(target, JSON.stringify({ url: "https://127.0.0.1:1/x.bundle", sha256: "0".repeat(64), version: "0.2.0" }));
    mkdirSync(join(env.dataDir, "update"), { recursive: true });
    const link = join(env.dataDir, "update", "request.json");
    rmSync(link, { force: true });
    symlinkSync(target, link);
    const config = requestConfig(env, dir, { allowed_urls: ["https://127.0.0.1:1/"], allow_unsigned_requests: true });
    const r = await applyRequest(env, config);
    assert.equal(r.code, 2, r.out);
    assert.match(r.out, /symbolic link/);
    assert.equal(existsSync(link), false, "the link is removed");
    assert.equal(existsSync(target), true, "the file it pointed at is not");
    assert.equal(readlinkSync(join(env.root, "current")), "releases/0.1.0");
  });
});

test("with fleet.command_keys an unsigned update command is refused (401) and leaves no request", async () => {
  await withInstalled(async (env, dir) => {
    const key = generateKeyPairSync("ed25519");
    const pub = key.publicKey.export({ type: "spki", format: "pem" }).toString();
    await withBroker(dir, async (broker) => {
      const gw = await startGateway(env.dataDir, { fleet: { ...fleetConfig(broker), command_keys: [pub] } });
      const cl = await fleetClient(broker);
      try {
        await until(() => fleetOf(gw).connected, "gateway connected");
        let r: { json: any } | null = null;
        await until(
          async () =>
            (r = (await Promise.race([
              command(cl, "site-001", "update", { url: "https://127.0.0.1/x.bundle", sha256: "0".repeat(64), version: "0.2.0" }),
              new Promise((res) => setTimeout(() => res(null), 1000)),
            ])) as { json: any } | null) !== null,
          "an answer",
        );
        r = r!;
        assert.equal(r.json.status, 401);
        assert.equal(existsSync(join(env.dataDir, "update", "request.json")), false);
      } finally {
        await cl.endAsync();
        await gw.stop();
      }
    });
  });
});
