// What root does with a request the daemon left (`sitegate update apply-request`, the request
// unit's command), when the daemon may be compromised and wrote the request itself: the
// config decides which URLs may be fetched (every redirect too) and whether unsigned requests
// count; the download lands in a root-only folder after a free-space check; the request file
// is taken through a descriptor of update/, so a swap of that folder makes root remove
// nothing elsewhere. Real HTTPS servers on loopback; the swap is driven by a test hook.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash, generateKeyPairSync } from "node:crypto";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, readlinkSync, renameSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { fakeBundle, requestConfig, state, updateAsync, withInstalled, type UpdateEnv } from "../support/ota.js";
import { testCert } from "../support/tls.js";
import { until } from "../support/wait.js";

const sha256 = (file: string) => createHash("sha256").update(readFileSync(file)).digest("hex");

interface Web {
  url(path: string): string;
  /** requests seen, by path */
  seen: string[];
  /** body bytes sent */
  sent: number;
  close(): void;
}

type Handler = (path: string, res: import("node:http").ServerResponse, web: Web) => void;

async function serve(handler: Handler): Promise<Web> {
  const cert = testCert();
  const web: Web = { url: () => "", seen: [], sent: 0, close: () => {} };
  const server: Server = createServer({ cert: cert.cert, key: cert.key }, (req, res) => {
    web.seen.push(req.url ?? "");
    handler(req.url ?? "", res, web);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  web.url = (p) => `https://127.0.0.1:${port}${p}`;
  web.close = () => {
    server.closeAllConnections();
    server.close();
  };
  return web;
}

function files(map: Record<string, string>): Handler {
  return (path, res, web) => {
    const f = map[path];
    if (!f) return void res.writeHead(404).end();
    const body = readFileSync(f);
    web.sent += body.length;
    res.end(body);
  };
}

const applyRequest = (env: UpdateEnv, config: string, extra: Record<string, string> = {}) =>
  updateAsync(env, ["apply-request", "--config", config], { NODE_EXTRA_CA_CERTS: testCert().certFile, ...extra });

function leaveRequest(env: UpdateEnv, req: Record<string, unknown>): string {
  mkdirSync(join(env.dataDir, "update"), { recursive: true });
  const file = join(env.dataDir, "update", "request.json");
  writeFileSync(file, JSON.stringify(req));
  return file;
}

test("apply-request fetches only under update.allowed_urls: a URL outside them and a redirect out of them are refused, the other server never asked", async () => {
  await withInstalled(async (env, dir) => {
    const good = await fakeBundle({ version: "0.2.0", mode: "healthy", key: env.keys.privateKey, out: join(dir, "v020.bundle") });
    const outside = await serve(files({ "/sitegate/0.2.0.bundle": good }));
    const allowed = await serve((path, res) => {
      if (path === "/sitegate/hop.bundle") return void res.writeHead(302, { location: outside.url("/sitegate/0.2.0.bundle") }).end();
      res.writeHead(404).end();
    });
    try {
      const config = requestConfig(env, dir, { allowed_urls: [allowed.url("/sitegate/")], allow_unsigned_requests: true });
      const req = { sha256: sha256(good), version: "0.2.0" };

      leaveRequest(env, { ...req, url: outside.url("/sitegate/0.2.0.bundle") });
      let r = await applyRequest(env, config);
      assert.equal(r.code, 2, r.out);
      assert.match(r.out, /is not under update\.allowed_urls/);
      assert.deepEqual(outside.seen, [], "root did not connect to a URL outside update.allowed_urls");

      // same origin, but not under the allowed folder (".." is resolved before the comparison)
      leaveRequest(env, { ...req, url: allowed.url("/sitegate/../other/0.2.0.bundle") });
      r = await applyRequest(env, config);
      assert.equal(r.code, 2, r.out);
      assert.match(r.out, /is not under update\.allowed_urls/);
      leaveRequest(env, { ...req, url: allowed.url("/sitegate/..%2Fother/0.2.0.bundle") });
      r = await applyRequest(env, config);
      assert.equal(r.code, 2, r.out);
      assert.match(r.out, /%2F/);
      assert.deepEqual(allowed.seen, []);

      leaveRequest(env, { ...req, url: allowed.url("/sitegate/hop.bundle") });
      r = await applyRequest(env, config);
      assert.equal(r.code, 2, r.out);
      assert.match(r.out, /refused: https:\/\/127\.0\.0\.1:\d+\/sitegate\/0\.2\.0\.bundle is not under update\.allowed_urls/);
      assert.deepEqual(allowed.seen, ["/sitegate/hop.bundle"]);
      assert.deepEqual(outside.seen, [], "the redirect out of the allowed URLs was not followed");
      assert.equal(readlinkSync(join(env.root, "current")), "releases/0.1.0");
      assert.equal(state(env).last.result, "refused");
    } finally {
      outside.close();
      allowed.close();
    }
  });
});

test("apply-request refuses an unsigned request unless the config allows them, before any download", async () => {
  await withInstalled(async (env, dir) => {
    const good = await fakeBundle({ version: "0.2.0", mode: "healthy", key: env.keys.privateKey, out: join(dir, "v020.bundle") });
    const web = await serve(files({ "/u/0.2.0.bundle": good }));
    try {
      const req = { url: web.url("/u/0.2.0.bundle"), sha256: sha256(good), version: "0.2.0" };
      // no fleet.command_keys and no allow_unsigned_requests: the daemon took an unsigned command
      leaveRequest(env, req);
      let r = await applyRequest(env, requestConfig(env, dir, { allowed_urls: [web.url("/u/")] }));
      assert.equal(r.code, 2, r.out);
      assert.match(r.out, /unsigned update requests are refused: set fleet\.command_keys/);
      assert.deepEqual(web.seen, []);
      assert.equal(existsSync(join(env.dataDir, "update", "request.json")), false, "taken in, whatever the outcome");

      // with command keys configured, the daemon only writes requests that were signed
      const pub = generateKeyPairSync("ed25519").publicKey.export({ type: "spki", format: "pem" }).toString();
      const fleet = { url: "mqtt://127.0.0.1:1883", username: "site-001", command_keys: [pub] };
      leaveRequest(env, req);
      r = await applyRequest(env, requestConfig(env, dir, { allowed_urls: [web.url("/u/")] }, fleet));
      assert.equal(r.code, 0, r.out);
      assert.equal(readlinkSync(join(env.root, "current")), "releases/0.2.0");
    } finally {
      web.close();
    }
  });
});

test("the download goes to the configured root-only folder, and a folder others may write is refused", async () => {
  await withInstalled(async (env, dir) => {
    const good = await fakeBundle({ version: "0.2.0", mode: "healthy", key: env.keys.privateKey, out: join(dir, "v020.bundle") });
    const web = await serve(files({ "/u/0.2.0.bundle": good }));
    try {
      const downloads = join(dir, "shared-downloads");
      mkdirSync(downloads, { mode: 0o777 });
      spawnSync("chmod", ["0777", downloads]);
      const update = { allowed_urls: [web.url("/u/")], allow_unsigned_requests: true, download_dir: downloads };
      leaveRequest(env, { url: web.url("/u/0.2.0.bundle"), sha256: sha256(good), version: "0.2.0" });
      const r = await applyRequest(env, requestConfig(env, dir, update));
      assert.equal(r.code, 2, r.out);
      assert.match(r.out, /the download folder .* that group and others cannot write \(it is uid 0, mode 777\)/);
      assert.deepEqual(web.seen, []);
    } finally {
      web.close();
    }
  });
});

test("a download that does not fit the download folder's free space is refused before a byte is written", async (t) => {
  if (process.getuid?.() !== 0) return t.skip("needs root (mounts a small tmpfs)");
  await withInstalled(async (env, dir) => {
    const small = join(dir, "small");
    mkdirSync(small, { mode: 0o700 });
    assert.equal(spawnSync("mount", ["-t", "tmpfs", "-o", "size=20m,mode=0700", "tmpfs", small]).status, 0);
    // 64 MiB announced, streamed slowly: the old code wrote until the disk was full
    const chunk = Buffer.alloc(64 * 1024);
    const web = await serve((path, res, w) => {
      res.writeHead(200, { "content-length": String(64 * 1024 * 1024) });
      const pump = () => {
        if (w.sent >= 64 * 1024 * 1024 || res.destroyed) return res.end();
        w.sent += chunk.length;
        if (res.write(chunk)) setImmediate(pump);
        else res.once("drain", pump);
      };
      pump();
    });
    try {
      const update = { allowed_urls: [web.url("/u/")], allow_unsigned_requests: true, download_dir: join(small, "dl") };
      leaveRequest(env, { url: web.url("/u/0.2.0.bundle"), sha256: "0".repeat(64), version: "0.2.0" });
      const r = await applyRequest(env, requestConfig(env, dir, update));
      assert.equal(r.code, 2, r.out);
      assert.match(r.out, /needs 64\.0 MiB plus 16\.0 MiB to spare; .*\/dl\/\.incoming-\d+-\w+ has \d+\.\d MiB free/);
      const used = spawnSync("df", ["--output=used", "-B1", small], { encoding: "utf8" }).stdout.trim().split("\n")[1];
      assert.ok(Number(used) < 1024 * 1024, `${used} bytes written to the download folder`);
      assert.equal(state(env).last.result, "refused");
    } finally {
      web.close();
      spawnSync("umount", ["-l", small]);
    }
  });
});

test("a request's announced size: another size from the server is refused, and no more than that is read", async () => {
  await withInstalled(async (env, dir) => {
    const good = await fakeBundle({ version: "0.2.0", mode: "healthy", key: env.keys.privateKey, out: join(dir, "v020.bundle") });
    const size = statSync(good).size;
    const chunked = readFileSync(good);
    const web = await serve((path, res, w) => {
      if (path === "/u/announced.bundle") return files({ "/u/announced.bundle": good })(path, res, w);
      // no Content-Length: chunked, and far more than the request said
      res.writeHead(200);
      for (let i = 0; i < 16; i++) res.write(chunked);
      res.end();
    });
    try {
      const config = requestConfig(env, dir, { allowed_urls: [web.url("/u/")], allow_unsigned_requests: true });
      const req = { sha256: sha256(good), version: "0.2.0" };
      leaveRequest(env, { ...req, url: web.url("/u/announced.bundle"), size: size + 1 });
      let r = await applyRequest(env, config);
      assert.equal(r.code, 2, r.out);
      assert.match(r.out, new RegExp(`is ${size} bytes, the request announced ${size + 1}`));
      leaveRequest(env, { ...req, url: web.url("/u/chunked.bundle"), size });
      r = await applyRequest(env, config);
      assert.equal(r.code, 2, r.out);
      assert.match(r.out, new RegExp(`larger than ${size} bytes`));
      leaveRequest(env, { ...req, url: web.url("/u/announced.bundle"), size });
      r = await applyRequest(env, config);
      assert.equal(r.code, 0, r.out);
      assert.equal(readlinkSync(join(env.root, "current")), "releases/0.2.0");
    } finally {
      web.close();
    }
  });
});

test("request.json is removed through a descriptor of update/: swapping update/ for a link meanwhile removes nothing elsewhere", async () => {
  await withInstalled(async (env, dir) => {
    const elsewhere = join(dir, "elsewhere");
    mkdirSync(elsewhere);
    const victim = join(elsewhere, "request.json");
    writeFileSync(victim, "root's own file\n");
    leaveRequest(env, { url: "https://127.0.0.1:1/u/0.2.0.bundle", sha256: "0".repeat(64), version: "0.2.0" });
    const fifo = join(dir, "resume");
    assert.equal(spawnSync("mkfifo", [fifo]).status, 0);
    const hookFile = join(dir, "hook");
    const config = requestConfig(env, dir, { allowed_urls: ["https://127.0.0.1:1/u/"], allow_unsigned_requests: true });
    const run = applyRequest(env, config, {
      SITEGATE_TEST_HOOKS: "1",
      SITEGATE_TEST_HOOK_AT: "request-read",
      SITEGATE_TEST_HOOK_FILE: hookFile,
      SITEGATE_TEST_HOOK_RESUME: fifo,
    });
    await until(() => existsSync(hookFile), "apply-request to have read the request");
    // what a compromised daemon does between root's read and its removal
    renameSync(join(env.dataDir, "update"), join(env.dataDir, "update.moved"));
    symlinkSync(elsewhere, join(env.dataDir, "update"));
    writeFileSync(fifo, "go\n");
    const r = await run;
    assert.equal(readFileSync(victim, "utf8"), "root's own file\n", `root removed a file outside the data dir:\n${r.out}`);
    assert.equal(existsSync(join(env.dataDir, "update.moved", "request.json")), false, "the request it read is the one removed");
  });
});

test("a fleet request for a release whose check-config refuses the site's config is refused with that reason, in update status; nothing is switched", async () => {
  await withInstalled(async (env, dir) => {
    const b = await fakeBundle({
      version: "0.2.0",
      mode: "healthy",
      key: env.keys.privateKey,
      out: join(dir, "v020.bundle"),
      configNeeds: "grid_code",
    });
    const web = await serve(files({ "/u/0.2.0.bundle": b }));
    try {
      const config = requestConfig(env, dir, { allowed_urls: [web.url("/u/")], allow_unsigned_requests: true });
      leaveRequest(env, { url: web.url("/u/0.2.0.bundle"), sha256: sha256(b), version: "0.2.0" });
      const r = await applyRequest(env, config);
      assert.equal(r.code, 2, r.out);
      assert.match(r.out, /refused: release 0\.2\.0 does not accept this site's config/);
      assert.ok(existsSync(`${config}.checked-by-0.2.0`), "the new release's own check-config was asked");
      assert.equal(readlinkSync(join(env.root, "current")), "releases/0.1.0");
      assert.equal(existsSync(join(env.root, "releases", "0.2.0")), false);
      const last = state(env).last;
      assert.equal(last.result, "refused");
      assert.equal(last.version, "0.2.0");
      assert.match(last.reason, /does not accept this site's config[\s\S]*grid_code: Required \(release 0\.2\.0\)/);
    } finally {
      web.close();
    }
  });
});
