// Over-the-air update: refused bundles change nothing; a release that fails its health gate
// (crash loop or deadline) is rolled back with its database; kill -9 at three points of an
// apply leaves a release that starts; a real bundle of dist/ installs, runs and rolls back.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, readlinkSync, realpathSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { spawnSync } from "node:child_process";
import Database from "better-sqlite3";
import { stringify } from "yaml";
import { withTmpDir } from "../support/tmp.js";
import {
  FakeService,
  withInstalled,
  currentVersion,
  fakeBundle,
  forgedBundle,
  makeKeys,
  serving,
  snapshotTree,
  startsOf,
  state,
  status,
  update,
  updateAsync,
  updateCliEnv,
  updateEnv,
  waitFor,
  CLI,
  type UpdateEnv,
} from "../support/ota.js";
import { openDatabase, migrate } from "../../src/storage/db.js";
import { ALL_MIGRATIONS } from "../../src/daemon.js";
import { testConfigInput } from "../support/config.js";
import { testCert } from "../support/tls.js";
import { createServer } from "node:https";
import type { AddressInfo } from "node:net";

const OTHER_ARCH = process.arch === "x64" ? "arm64" : "x64";

test("bad signature, wrong arch, tampered payload and a lower version are refused, exit 2, and nothing changes", async () => {
  await withInstalled(async (env, dir) => {
    const before = snapshotTree(env.root);
    const stranger = makeKeys(dir, "stranger");
    const cases: [string, string, RegExp][] = [
      [
        "untrusted key",
        await fakeBundle({ version: "0.2.0", mode: "healthy", key: stranger.privateKey, out: join(dir, "unsigned.bundle") }),
        /refused: bad signature/,
      ],
      [
        "wrong arch",
        await fakeBundle({ version: "0.2.0", mode: "healthy", key: env.keys.privateKey, out: join(dir, "arch.bundle"), arch: OTHER_ARCH }),
        new RegExp(`refused: the bundle is for linux-${OTHER_ARCH}`),
      ],
      [
        "lower version",
        await fakeBundle({ version: "0.0.9", mode: "healthy", key: env.keys.privateKey, out: join(dir, "old.bundle") }),
        /refused: 0\.0\.9 is older than the current release 0\.1\.0 \(--allow-downgrade/,
      ],
      [
        "same version",
        await fakeBundle({ version: "0.1.0", mode: "healthy", key: env.keys.privateKey, out: join(dir, "same.bundle") }),
        /refused: 0\.1\.0 is already the current release/,
      ],
      // no runtime of its own: its addons must match this node's ABI (an apt upgrade of nodejs must not be able to break it)
      [
        "other Node ABI",
        await fakeBundle({
          version: "0.2.0",
          mode: "healthy",
          key: env.keys.privateKey,
          out: join(dir, "abi.bundle"),
          node: { version: "22.23.3", abi: "1", runtime: false },
        }),
        /refused: the bundle's native addons are for Node\.js 22\.23\.3 \(ABI 1\) and it carries no runtime; this controller runs Node\.js/,
      ],
    ];
    // tampered: a good bundle with one payload byte flipped after signing
    const good = await fakeBundle({ version: "0.2.0", mode: "healthy", key: env.keys.privateKey, out: join(dir, "tampered.bundle") });
    const bytes = readFileSync(good);
    bytes[bytes.length - 100] ^= 0xff;
    writeFileSync(good, bytes);
    cases.push(["tampered payload", good, /refused: the payload does not match the sha256/]);
    // a bit flipped in the signed manifest fails the signature
    const manifestHit = await fakeBundle({
      version: "0.2.0",
      mode: "healthy",
      key: env.keys.privateKey,
      out: join(dir, "manifest.bundle"),
    });
    const mb = readFileSync(manifestHit);
    const at = mb.indexOf(Buffer.from('"0.2.0"'));
    mb[at + 1] = "9".charCodeAt(0);
    writeFileSync(manifestHit, mb);
    cases.push(["edited manifest", manifestHit, /refused: bad signature/]);

    for (const [what, file, message] of cases) {
      const r = update(env, ["apply", file]);
      assert.equal(r.status, 2, `${what}: exit ${r.status} ${r.stdout} ${r.stderr}`);
      assert.match(r.stderr, message, what);
      assert.equal(r.stderr.trim().split("\n").length, 1, `${what}: one line`);
      assert.equal(snapshotTree(env.root), before, `${what}: the root changed`);
    }
    // a manifest that promises a runtime the payload lacks is refused after unpacking (the
    // unpacked copy is removed; only the releases folder's mtime moves), current unchanged
    const noRuntime = await fakeBundle({
      version: "0.2.0",
      mode: "healthy",
      key: env.keys.privateKey,
      out: join(dir, "noruntime.bundle"),
      node: { version: "24.21.0", abi: "137", runtime: true },
    });
    const nr = update(env, ["apply", noRuntime]);
    assert.equal(nr.status, 2, nr.stderr);
    assert.match(nr.stderr, /refused: the payload is not release 0\.2\.0/);
    assert.deepEqual(readdirSync(join(env.root, "releases")), ["0.1.0"]);
    assert.equal(readlinkSync(join(env.root, "current")), "releases/0.1.0");
    // the downgrade goes through when asked for
    const r = update(env, ["apply", "--allow-downgrade", cases[2][1]]);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(readlinkSync(join(env.root, "current")), "releases/0.0.9");
  });
});

test("a release that crash-loops is rolled back after 3 starts and its database restored; the old release serves again", async () => {
  await withInstalled(async (env, dir) => {
    // the old release's database: every shipped migration and one row of its data
    const db = openDatabase(env.dataDir);
    migrate(db, ALL_MIGRATIONS);
    db.exec("CREATE TABLE old_data (v TEXT); INSERT INTO old_data VALUES ('before')");
    db.close();
    const svc = new FakeService(env, ["run"], { FAKE_SQLITE: createRequire(import.meta.url).resolve("better-sqlite3") });
    svc.start();
    try {
      await waitFor(env, () => existsSync(join(env.dataDir, "update", "healthy-0.1.0")), "0.1.0 healthy");
      const migrations = { ...Object.fromEntries(ALL_MIGRATIONS.map((m) => [m.module, m.migrations.length])), zz_new: 1 };
      const b = await fakeBundle({ version: "0.2.0", mode: "crash", key: env.keys.privateKey, out: join(dir, "crash.bundle"), migrations });
      const r = update(env, ["apply", b]);
      assert.equal(r.status, 0, r.stderr);
      assert.match(r.stdout, /database backed up to .*backup-before-0\.2\.0\.db/, "new migrations: a backup first");
      await waitFor(
        env,
        () => state(env).last?.result === "rolled back" && serving(env) === "0.1.0",
        "the rollback and 0.1.0 serving again",
      );
      const s = status(env);
      assert.equal(s.current, "0.1.0");
      assert.equal(s.pending, null);
      assert.match(s.last.reason, /started 3 times/);
      assert.equal(startsOf(env, "0.2.0"), 3, svc.log.join("\n"));
    } finally {
      await svc.stop();
    }
    const after = new Database(join(env.dataDir, "sitegate.db"), { readonly: true });
    assert.equal(after.prepare("SELECT v FROM old_data").pluck().get(), "before", "the old release's data is back");
    assert.equal(after.prepare("SELECT count(*) FROM sqlite_master WHERE name = 'added_by_new'").pluck().get(), 0);
    assert.equal(after.prepare("SELECT count(*) FROM schema_migrations WHERE module = 'zz_new'").pluck().get(), 0);
    after.close();
  });
});

test("a release that never becomes healthy is rolled back at its deadline by the timer check", async () => {
  await withInstalled(async (env, dir) => {
    const svc = new FakeService(env);
    svc.start();
    try {
      await waitFor(env, () => serving(env) === "0.1.0", "0.1.0 serving");
      const b = await fakeBundle({ version: "0.2.0", mode: "hang", key: env.keys.privateKey, out: join(dir, "hang.bundle") });
      const r = update(env, ["apply", b, "--health-timeout", "2"]);
      assert.equal(r.status, 0, r.stderr);
      await waitFor(env, () => serving(env) === "0.2.0" && state(env).pending?.starts === 1, "0.2.0 started");
      assert.equal(state(env).pending.phase, "gating");
      // what sitegate-update-check.timer runs; before the deadline it leaves the release alone
      const deadline = Date.parse(state(env).pending.deadline_at);
      const early = update(env, ["check", "--timer"]);
      assert.equal(early.status, 0, early.stderr);
      if (!/restarting to roll back/.test(early.stdout)) {
        // (on a slow machine the deadline may already have passed: then `early` did the next step)
        assert.equal(state(env).pending?.phase, "gating", "left alone before its deadline");
        // the deadline is wall-clock time kept by another process: wait it out once, then one timer check
        await new Promise((r) => setTimeout(r, Math.max(0, deadline - Date.now()) + 20));
        const late = update(env, ["check", "--timer"]);
        assert.match(late.stdout, /restarting to roll back to 0\.1\.0/);
      }
      await waitFor(env, () => state(env).last?.result === "rolled back" && serving(env) === "0.1.0", "0.1.0 serving again");
      const s = status(env);
      assert.equal(s.current, "0.1.0");
      assert.match(s.last.reason, /not healthy by/);
      assert.equal(startsOf(env, "0.2.0"), 1, "the hanging release was not restarted before its deadline");
    } finally {
      await svc.stop();
    }
  });
});

test("a bundle swapped for unsigned code after its signature was checked is not what gets installed", async () => {
  await withInstalled(async (env, dir) => {
    // the folder the bundle is applied from is writable by someone other than root
    const good = await fakeBundle({
      version: "0.2.0",
      mode: "healthy",
      key: env.keys.privateKey,
      out: join(dir, "incoming", "sitegate.bundle"),
      padFiles: 1,
    });
    const stranger = makeKeys(dir, "stranger");
    const evil = await fakeBundle({
      version: "0.2.0",
      mode: "healthy",
      key: stranger.privateKey,
      out: join(dir, "evil.bundle"),
      extraFiles: { EVIL: "unsigned code\n" },
    });
    const forged = forgedBundle(good, evil, join(dir, "incoming", ".forged"));
    const fifo = join(dir, "resume");
    assert.equal(spawnSync("mkfifo", [fifo]).status, 0);
    const hookFile = join(env.dataDir, "hook");
    const run = updateAsync(env, ["apply", good], {
      SITEGATE_TEST_HOOKS: "1",
      SITEGATE_TEST_HOOK_AT: "verified",
      SITEGATE_TEST_HOOK_FILE: hookFile,
      SITEGATE_TEST_HOOK_RESUME: fifo,
    });
    await waitFor(env, () => existsSync(hookFile), "apply to have checked the signature");
    renameSync(forged, good); // the swap, while apply waits between its checks and its unpack
    writeFileSync(fifo, "go\n");
    const r = await run;
    assert.ok(!existsSync(join(env.root, "releases", "0.2.0", "EVIL")), `the swapped-in unsigned code was installed:\n${r.out}`);
    assert.equal(r.code, 0, r.out);
    assert.equal(readlinkSync(join(env.root, "current")), "releases/0.2.0", "the verified copy is installed");
  });
});

/** `current` points at a complete release whose entry runs. */
function assertStartable(env: UpdateEnv): string {
  const target = readlinkSync(join(env.root, "current"));
  const dir = join(env.root, target);
  assert.ok(existsSync(join(dir, "manifest.json")), `${target} is complete`);
  const r = spawnSync(process.execPath, [join(env.root, "current", "dist", "src", "cli.js"), "--version"], { encoding: "utf8" });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout.trim(), target.replace("releases/", ""));
  return r.stdout.trim();
}

// unpack: half-way through tar; unpacked: release renamed into place; pending: state written,
// symlinks not yet switched; switched: current points at the new release, before the restart
for (const point of ["unpack", "unpacked", "pending", "switched"] as const) {
  test(`kill -9 during apply at "${point}" leaves a release that starts`, async () => {
    await withInstalled(async (env, dir) => {
      const b = await fakeBundle({
        version: "0.2.0",
        mode: "healthy",
        key: env.keys.privateKey,
        out: join(dir, "new.bundle"),
        padFiles: point === "unpack" ? 200 : 0,
      });
      const hookFile = join(env.dataDir, "hook");
      const child = spawn(process.execPath, [CLI, "update", "apply", b], {
        stdio: "ignore",
        env: updateCliEnv(env, "", { SITEGATE_TEST_HOOKS: "1", SITEGATE_TEST_HOOK_AT: point, SITEGATE_TEST_HOOK_FILE: hookFile }),
      });
      const exited = new Promise((r) => child.once("exit", r));
      await waitFor(env, () => existsSync(hookFile), `apply to reach ${point}`);
      if (point === "unpack") {
        const tmp = readdirSync(join(env.root, "releases")).filter((n) => n.startsWith(".tmp-"));
        assert.equal(tmp.length, 1, "caught half-way through the unpack");
        assert.ok(!existsSync(join(env.root, "releases", tmp[0], "manifest.json")));
      }
      child.kill("SIGKILL");
      await exited;

      const running = assertStartable(env);
      assert.equal(running, point === "switched" ? "0.2.0" : "0.1.0");
      // what the next boot does: the pre-start check, then the service
      const svc = new FakeService(env);
      svc.start();
      try {
        await waitFor(env, () => serving(env) === running, `${running} serving`);
        if (point === "switched") {
          await waitFor(env, () => existsSync(join(env.dataDir, "update", "healthy-0.2.0")), "0.2.0 to write its health marker");
          assert.match(update(env, ["check", "--timer"]).stdout, /0\.2\.0 is healthy/);
          assert.equal(status(env).last.result, "healthy");
        } else {
          // the interrupted install can simply be done again
          assert.equal(status(env).pending, null);
          if (point === "pending")
            assert.equal(status(env).last?.result, "abandoned", "the half-made update was dropped at the next start");
          const r = update(env, ["apply", b]);
          assert.equal(r.status, 0, r.stderr);
          assert.deepEqual(
            readdirSync(join(env.root, "releases")).filter((n) => n.startsWith(".")),
            [],
            "no half-unpacked leftovers",
          );
          await waitFor(env, () => serving(env) === "0.2.0", "0.2.0 serving");
        }
      } finally {
        await svc.stop();
      }
    });
  });
}

test("a real bundle of dist/ installs, the daemon marks itself healthy, and `update rollback` brings the old release back", async () => {
  await withTmpDir(async (dir) => {
    const keysDir = join(dir, "keys");
    let r = spawnSync(process.execPath, [CLI, "update", "keygen", "--out", keysDir], { encoding: "utf8" });
    assert.equal(r.status, 0, r.stderr);
    const bundleFile = join(dir, "real.bundle");
    r = spawnSync(
      process.execPath,
      [CLI, "update", "bundle", "--key", join(keysDir, "sitegate-update.key"), "--out", bundleFile, "--version", "0.2.0"],
      { encoding: "utf8" },
    );
    assert.equal(r.status, 0, r.stderr);
    const env = updateEnv(dir, { privateKey: null as never, trustDir: keysDir });
    // the old release: a fake 0.1.0 signed with the same key
    const { createPrivateKey } = await import("node:crypto");
    const key = createPrivateKey(readFileSync(join(keysDir, "sitegate-update.key")));
    const old = await fakeBundle({ version: "0.1.0", mode: "healthy", key, out: join(dir, "old.bundle") });
    assert.equal(update(env, ["apply", old]).status, 0);
    const config = join(dir, "config.yaml");
    writeFileSync(config, stringify(testConfigInput(env.dataDir)));
    const svc = new FakeService(env, ["run", "--config", config]);
    svc.start();
    try {
      await waitFor(env, () => serving(env) === "0.1.0", "0.1.0 serving");
      // the real release's own check-config (this checkout's schema) accepts the site's config
      r = update(env, ["apply", "--config", config, bundleFile]);
      assert.equal(r.status, 0, r.stdout + r.stderr);
      assert.match(r.stdout, /release 0\.2\.0 accepts the config/);
      const release = realpathSync(join(env.root, "current"));
      assert.ok(existsSync(join(release, "node_modules", "better-sqlite3")), "production modules are in the release");
      assert.ok(!existsSync(join(release, "node_modules", "typescript")), "dev modules are not");
      await waitFor(env, () => existsSync(join(env.dataDir, "update", "healthy-0.2.0")), "the real daemon to write its health marker");
      r = update(env, ["check", "--timer"]);
      assert.match(r.stdout, /0\.2\.0 is healthy/);
      assert.equal(status(env).current, "0.2.0");
      // the operator goes back
      rmSync(join(env.dataDir, "serving"));
      r = update(env, ["rollback"]);
      assert.equal(r.status, 0, r.stderr);
      await waitFor(env, () => serving(env) === "0.1.0" && currentVersion(env) === "0.1.0", "0.1.0 serving after the rollback");
      assert.equal(status(env).last.result, "rolled back");
    } finally {
      await svc.stop();
    }
  });
});

test("apply fetches a bundle over https and refuses plain http", async () => {
  await withInstalled(async (env, dir) => {
    const b = await fakeBundle({ version: "0.2.0", mode: "healthy", key: env.keys.privateKey, out: join(dir, "net.bundle") });
    const cert = testCert();
    const server = createServer({ cert: cert.cert, key: cert.key }, (req, res) => {
      if (req.url === "/sitegate-0.2.0.bundle") res.end(readFileSync(b));
      else res.writeHead(404).end();
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const port = (server.address() as AddressInfo).port;
    // the server runs in this process, so the CLI must run without blocking it
    const run = (args: string[]) => updateAsync(env, args, { NODE_EXTRA_CA_CERTS: cert.certFile });
    try {
      const before = snapshotTree(env.root);
      let r = await run(["apply", `http://127.0.0.1:${port}/sitegate-0.2.0.bundle`]);
      assert.equal(r.code, 2, r.out);
      assert.match(r.out, /only https:\/\//);
      r = await run(["apply", `https://127.0.0.1:${port}/missing.bundle`]);
      assert.equal(r.code, 1, r.out);
      assert.match(r.out, /HTTP 404/);
      assert.equal(snapshotTree(env.root), before, "failed downloads leave nothing behind");
      r = await run(["apply", `https://127.0.0.1:${port}/sitegate-0.2.0.bundle`]);
      assert.equal(r.code, 0, r.out);
      assert.equal(readlinkSync(join(env.root, "current")), "releases/0.2.0");
    } finally {
      server.close();
    }
  });
});

test("the units run the current release, gate it from the previous one before every start, and time the deadline", () => {
  const dir = join(fileURLToPath(import.meta.url), "../../../../systemd");
  const unit = readFileSync(join(dir, "sitegate.service"), "utf8").split("\n");
  const pre = unit.filter((l) => l.startsWith("ExecStartPre="));
  assert.match(
    pre[0] ?? "",
    /^ExecStartPre=-\+\/opt\/sitegate\/previous\/node\/bin\/node \/opt\/sitegate\/previous\/dist\/src\/cli\.js update check$/,
    "the gate runs first, as root, from the previous release on its own runtime, never blocking the start",
  );
  assert.ok(
    unit.some((l) =>
      /^ExecStart=\/opt\/sitegate\/current\/node\/bin\/node (--\S+ )*\/opt\/sitegate\/current\/dist\/src\/cli\.js run /.test(l),
    ),
    "runs the current release on its own runtime (node flags may come first)",
  );
  assert.match(readFileSync(join(dir, "sitegate-update-check.service"), "utf8"), /update check --timer/);
  assert.match(readFileSync(join(dir, "sitegate-update-check.timer"), "utf8"), /OnUnitActiveSec=30/);
});

test("apply keeps only the current and previous releases and drops unfinished unpacks", async () => {
  await withInstalled(async (env, dir) => {
    const key = env.keys.privateKey;
    let r = update(env, ["apply", await fakeBundle({ version: "0.2.0", mode: "healthy", key, out: join(dir, "b2") })]);
    assert.equal(r.status, 0, r.stderr);
    // 0.2.0 proves healthy (what its daemon would write), and the timer check keeps it
    mkdirSync(join(env.dataDir, "update"), { recursive: true });
    writeFileSync(join(env.dataDir, "update", "healthy-0.2.0"), "{}");
    assert.match(update(env, ["check", "--timer"]).stdout, /0\.2\.0 is healthy/);
    mkdirSync(join(env.root, "releases", ".tmp-0.9.0-dead"));
    r = update(env, ["apply", await fakeBundle({ version: "0.3.0", mode: "healthy", key, out: join(dir, "b3") })]);
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(readdirSync(join(env.root, "releases")).sort(), ["0.2.0", "0.3.0"], "0.1.0 and the dead unpack are gone");
    assert.equal(readlinkSync(join(env.root, "previous")), "releases/0.2.0");
    assert.equal(currentVersion(env), "0.3.0");
  });
});

test("a second apply while an update waits for its health check is refused and changes nothing", async () => {
  await withInstalled(async (env, dir) => {
    const key = env.keys.privateKey;
    let r = update(env, ["apply", await fakeBundle({ version: "0.2.0", mode: "healthy", key, out: join(dir, "b2") })]);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(state(env).pending.phase, "gating");
    const before = snapshotTree(env.root);
    r = update(env, ["apply", await fakeBundle({ version: "0.3.0", mode: "healthy", key, out: join(dir, "b3") })]);
    assert.equal(r.status, 2, r.stdout + r.stderr);
    assert.match(r.stderr, /refused: the update to 0\.2\.0 is still waiting for its health check/);
    assert.equal(snapshotTree(env.root), before);
  });
});

test("a release that needs a newer Node.js than this controller has is refused", async () => {
  await withInstalled(async (env, dir) => {
    const before = snapshotTree(env.root);
    const b = await fakeBundle({ version: "0.2.0", mode: "healthy", key: env.keys.privateKey, out: join(dir, "b2"), nodeMin: "999.0.0" });
    const r = update(env, ["apply", b]);
    assert.equal(r.status, 2, r.stdout + r.stderr);
    assert.match(
      r.stderr,
      new RegExp(`refused: the release needs Node\\.js >= 999\\.0\\.0, this controller has ${process.versions.node.replace(/\./g, "\\.")}`),
    );
    assert.equal(snapshotTree(env.root), before);
  });
});

test("a release whose own check-config refuses this site's config is refused with its reason before the switch; the old release keeps running", async () => {
  await withInstalled(async (env, dir) => {
    const config = join(dir, "config.yaml");
    writeFileSync(config, stringify(testConfigInput(env.dataDir)));
    // 0.2.0's schema needs a block this site's config does not have
    const b = await fakeBundle({
      version: "0.2.0",
      mode: "healthy",
      key: env.keys.privateKey,
      out: join(dir, "needs.bundle"),
      configNeeds: "grid_code",
    });
    const svc = new FakeService(env);
    svc.start();
    try {
      await waitFor(env, () => serving(env) === "0.1.0", "0.1.0 serving");
      const releases = snapshotTree(join(env.root, "releases"));
      const r = update(env, ["apply", "--config", config, b]);
      assert.equal(r.status, 2, r.stdout + r.stderr);
      assert.match(
        r.stderr,
        /refused: release 0\.2\.0 does not accept this site's config .*config\.yaml \(its check-config, as uid \d+: exit 2\)/,
      );
      assert.match(r.stderr, /grid_code: Required \(release 0\.2\.0\)/, "check-config's own words are the reason");
      assert.ok(existsSync(`${config}.checked-by-0.2.0`), "the new release's check-config ran, not the old one's");
      // nothing changed: current, previous, the releases (no staged copy left), the running service
      assert.equal(currentVersion(env), "0.1.0");
      assert.equal(readlinkSync(join(env.root, "previous")), "releases/0.1.0");
      assert.equal(snapshotTree(join(env.root, "releases")), releases);
      assert.equal(startsOf(env, "0.2.0"), 0);
      assert.equal(startsOf(env, "0.1.0"), 1, "the service was not restarted");
      assert.equal(serving(env), "0.1.0");
      // recorded where update status (and the fleet's status topic) reports it
      const s = status(env);
      assert.equal(s.pending, null);
      assert.equal(s.last.version, "0.2.0");
      assert.equal(s.last.result, "refused");
      assert.match(s.last.reason, /does not accept this site's config[\s\S]*grid_code: Required/);
      const text = update(env, ["status"]);
      assert.match(text.stdout, /last: +0\.2\.0 refused at .*grid_code: Required/s);

      // the operator adds the block: the same bundle installs
      writeFileSync(config, readFileSync(config, "utf8") + "grid_code: {}\n");
      const ok = update(env, ["apply", "--config", config, b]);
      assert.equal(ok.status, 0, ok.stdout + ok.stderr);
      assert.match(ok.stdout, /release 0\.2\.0 accepts the config/);
      await waitFor(env, () => serving(env) === "0.2.0", "0.2.0 serving");
    } finally {
      await svc.stop();
    }
  });
});

test("apply without a config names that it did not check one; a --config that is not there is bad usage", async () => {
  await withInstalled(async (env, dir) => {
    const b = await fakeBundle({ version: "0.2.0", mode: "healthy", key: env.keys.privateKey, out: join(dir, "b.bundle") });
    const before = snapshotTree(env.root);
    const missing = update(env, ["apply", "--config", join(dir, "nope.yaml"), b]);
    assert.equal(missing.status, 2, missing.stdout + missing.stderr);
    assert.match(missing.stderr, /no config at .*nope\.yaml/);
    assert.equal(snapshotTree(env.root), before);
    const r = update(env, ["apply", b], { SITEGATE_RESTART_CMD: "" });
    assert.equal(r.status, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /no site config given: release 0\.2\.0 is installed without checking it against one/);
  });
});
