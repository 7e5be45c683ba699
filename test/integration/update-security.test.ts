// Over-the-air update against someone who can write where it should not matter: the folder a
// bundle is applied from, the daemon's data dir (a compromised daemon), a signed payload with
// entries no build makes, a download server, a key folder. Each refusal changes nothing.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import {
  chmodSync,
  chownSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statfsSync,
  statSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
} from "node:fs";
import { createServer } from "node:https";
import { createServer as createHttpServer } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import Database from "better-sqlite3";
import { ALL_MIGRATIONS } from "../../src/daemon.js";
import { migrate, openDatabase } from "../../src/storage/db.js";
import { testCert } from "../support/tls.js";
import { withTmpDir } from "../support/tmp.js";
import { traversableRelease } from "../support/traversable-release.js";
import {
  CLI,
  currentVersion,
  fakeBundle,
  releaseEntries,
  signedBundle,
  snapshotTree,
  state,
  tarOf,
  update,
  updateAsync,
  updateCliEnv,
  withInstalled,
  type TarEntry,
  type UpdateEnv,
} from "../support/ota.js";

/** The daemon's user in these tests: tests run as root, so a real chown to it shows who owns what. */
const DAEMON_UID = 65534;
const DAEMON_GID = 65534;

function leftovers(env: UpdateEnv): string[] {
  const inRoot = readdirSync(env.root).filter((n) => n.startsWith("."));
  const inReleases = readdirSync(join(env.root, "releases")).filter((n) => n.startsWith("."));
  return [...inRoot, ...inReleases];
}

test("a signed payload with a device, FIFO, link, setuid/setgid file or an escaping name is refused, and nothing is left", async () => {
  await withInstalled(async (env, dir) => {
    const outside = join(dir, "escaped");
    const cases: [string, TarEntry, RegExp][] = [
      ["char device", { name: "./dist/tty0", type: "3", mode: 0o666 }, /refused: the payload holds a character device \(\.\/dist\/tty0\)/],
      ["block device", { name: "./dist/sda", type: "4", mode: 0o660 }, /refused: the payload holds a block device/],
      ["fifo", { name: "./dist/pipe", type: "6" }, /refused: the payload holds a FIFO/],
      ["hard link", { name: "./dist/shadow", type: "1", linkname: "/etc/shadow" }, /refused: the payload holds a hard link/],
      ["symlink", { name: "./dist/keys", type: "2", linkname: "/etc/sitegate" }, /refused: the payload holds a symbolic link/],
      [
        "setuid",
        { name: "./dist/su", type: "0", mode: 0o4755, data: "#!/bin/sh\n" },
        /refused: the payload holds a setuid or setgid file \(\.\/dist\/su\)/,
      ],
      ["setgid", { name: "./dist/sg", type: "0", mode: 0o2755, data: "#!/bin/sh\n" }, /refused: the payload holds a setuid or setgid file/],
      ["dot-dot", { name: "../escaped", type: "0", data: "x" }, /refused: the payload holds the name "\.\.\/escaped"/],
      ["absolute", { name: outside, type: "0", data: "x" }, /refused: the payload holds the name/],
    ];
    // refused while unpacking: releases/ saw a temp folder come and go, nothing else changed
    const view = () => snapshotTree(env.root).replace(/^releases\/ .*$/m, "releases/");
    const before = view();
    for (const [what, entry, message] of cases) {
      const payload = gzipSync(tarOf([...releaseEntries("0.2.0"), entry]));
      const b = signedBundle(payload, "0.2.0", env.keys.privateKey, join(dir, `${what}.bundle`));
      const r = update(env, ["apply", b]);
      assert.equal(r.status, 2, `${what}: exit ${r.status}\n${r.stdout}${r.stderr}`);
      assert.match(r.stderr, message, what);
      assert.equal(view(), before, `${what}: the root changed`);
      assert.deepEqual(leftovers(env), [], `${what}: temp folders left`);
      assert.ok(!existsSync(outside), `${what}: a file was written outside the release`);
    }
  });
});

test("modes from the payload lose group and world write", async () => {
  await withInstalled(async (env, dir) => {
    const payload = gzipSync(
      tarOf([
        ...releaseEntries("0.2.0"),
        { name: "./dist/open.js", type: "0", mode: 0o777, data: "x" },
        { name: "./shared/", type: "5", mode: 0o1777 },
      ]),
    );
    const r = update(env, ["apply", signedBundle(payload, "0.2.0", env.keys.privateKey, join(dir, "modes.bundle"))]);
    assert.equal(r.status, 0, r.stderr);
    const rel = join(env.root, "releases", "0.2.0");
    assert.equal(statSync(join(rel, "dist", "open.js")).mode & 0o7777, 0o755);
    assert.equal(statSync(join(rel, "shared")).mode & 0o7777, 0o755);
    assert.equal(statSync(join(rel, "dist", "src", "cli.js")).mode & 0o7777, 0o644);
  });
});

test("a release larger than the free space is refused before unpacking; one that unpacks past its unpacked_size is stopped; no temp folder stays", async () => {
  await withInstalled(async (env, dir) => {
    const before = snapshotTree(env.root);
    const entries = releaseEntries("0.2.0");
    // claims a petabyte: refused on the manifest alone
    const huge = signedBundle(gzipSync(tarOf(entries)), "0.2.0", env.keys.privateKey, join(dir, "huge.bundle"), { unpacked_size: 2 ** 50 });
    let r = update(env, ["apply", huge]);
    assert.equal(r.status, 2, r.stdout + r.stderr);
    assert.match(r.stderr, /refused: the release unpacks to 1073741824\.0 MiB and needs 16\.0 MiB to spare; .* free/);
    assert.equal(snapshotTree(env.root), before);
    assert.deepEqual(leftovers(env), []);
    // 3 MiB of zeros in a bundle of a few KiB whose manifest says 64 KiB
    const bomb = signedBundle(
      gzipSync(tarOf([...entries, { name: "./zeros", type: "0", data: Buffer.alloc(3 << 20) }])),
      "0.2.0",
      env.keys.privateKey,
      join(dir, "bomb.bundle"),
      { unpacked_size: 64 * 1024 },
    );
    assert.ok(statSync(bomb).size < 16 * 1024);
    r = update(env, ["apply", bomb]);
    assert.equal(r.status, 2, r.stdout + r.stderr);
    assert.match(r.stderr, /refused: the payload holds more than its manifest's unpacked_size of 65536 bytes/);
    assert.deepEqual(leftovers(env), [], "the half-unpacked folder is removed");
    assert.equal(currentVersion(env), "0.1.0");
  });
});

test("the free-space check counts the database backup a migrating release needs: refused before anything changes", async () => {
  await withInstalled(async (env, dir) => {
    const b = await fakeBundle({
      version: "0.2.0",
      mode: "healthy",
      key: env.keys.privateKey,
      out: join(dir, "mig"),
      migrations: migrating(),
    });
    // A database as large as the data dir's free space (sparse: nothing is written): the
    // release itself fits, the release plus its backup do not.
    const st = statfsSync(env.dataDir);
    writeFileSync(join(env.dataDir, "sitegate.db"), "");
    truncateSync(join(env.dataDir, "sitegate.db"), st.bavail * st.bsize);
    const before = snapshotTree(env.root);
    const r = update(env, ["apply", b]);
    assert.equal(r.status, 2, r.stdout + r.stderr);
    assert.match(
      r.stderr,
      /refused: the release unpacks to \d+\.\d MiB and the database backup before its migrations takes up to \d+\.\d MiB and needs 16\.0 MiB to spare; .* free/,
    );
    assert.equal(snapshotTree(env.root), before);
    assert.ok(!existsSync(join(env.dataDir, "update")), "no backup started");
    assert.equal(currentVersion(env), "0.1.0");
  });
});

test("a bundle path that is a symlink is refused (the bundle is opened once, without following links)", async () => {
  await withInstalled(async (env, dir) => {
    const real = await fakeBundle({ version: "0.2.0", mode: "healthy", key: env.keys.privateKey, out: join(dir, "real.bundle") });
    const link = join(dir, "link.bundle");
    symlinkSync(real, link);
    const r = update(env, ["apply", link]);
    assert.equal(r.status, 2, r.stdout + r.stderr);
    assert.match(r.stderr, /refused: .*link\.bundle is a symbolic link/);
    assert.equal(currentVersion(env), "0.1.0");
  });
});

/** A data dir owned by the daemon's user with its database (every migration run) and a folder outside it owned by root. */
function daemonOwned(env: UpdateEnv, dir: string): { victim: string; victimFile: string } {
  chmodSync(dir, 0o755); // the daemon's user walks to its data dir
  const db = openDatabase(env.dataDir);
  migrate(db, ALL_MIGRATIONS);
  db.close();
  for (const f of readdirSync(env.dataDir)) chownSync(join(env.dataDir, f), DAEMON_UID, DAEMON_GID);
  chownSync(env.dataDir, DAEMON_UID, DAEMON_GID);
  const victim = join(dir, "victim-keys");
  mkdirSync(victim);
  const victimFile = join(victim, "site.key");
  writeFileSync(victimFile, "secret\n", { mode: 0o600 });
  return { victim, victimFile };
}

const migrating = () => ({ ...Object.fromEntries(ALL_MIGRATIONS.map((m) => [m.module, m.migrations.length])), zz_new: 1 });

test("a symlinked update/ folder or database file in the data dir makes apply refuse, and nothing outside the data dir changes owner; the new release's check-config runs as the data dir's owner", async () => {
  await withInstalled(async (env, dir) => {
    const { victim, victimFile } = daemonOwned(env, dir);
    const b = await fakeBundle({
      version: "0.2.0",
      mode: "healthy",
      key: env.keys.privateKey,
      out: join(dir, "b2"),
      migrations: migrating(),
    });
    const before = snapshotTree(env.root);
    const owners = () => [victim, victimFile].map((p) => `${lstatSync(p).uid}:${lstatSync(p).gid}`);
    const cases: [string, string, string][] = [
      ["update/ -> victim", join(env.dataDir, "update"), victim],
      ["sitegate.db-shm -> victim file", join(env.dataDir, "sitegate.db-shm"), victimFile],
      ["sitegate.db-wal -> victim file", join(env.dataDir, "sitegate.db-wal"), victimFile],
    ];
    for (const [what, link, target] of cases) {
      symlinkSync(target, link);
      const r = update(env, ["apply", b]);
      assert.deepEqual(owners(), ["0:0", "0:0"], `${what}: a file outside the data dir changed owner`);
      assert.deepEqual(readdirSync(victim), ["site.key"], `${what}: something was written outside the data dir`);
      assert.equal(r.status, 2, `${what}: exit ${r.status}\n${r.stdout}${r.stderr}`);
      assert.match(r.stderr, new RegExp(`refused: ${link.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")} is a symbolic link`), what);
      assert.equal(snapshotTree(env.root), before, `${what}: the root changed`);
      spawnSync("rm", ["-f", link]);
    }
    // without the links the same bundle installs, and the backup belongs to the daemon's user
    // from a release the daemon's user can reach: the updater's data-dir step runs its own
    // runtime and module as that user
    const release = traversableRelease(dir);
    const cli = join(release.dist, "cli.js");
    // the new release's check-config runs as the unit runs it: as the data dir's owner (its
    // fake leaves the uid it ran as next to the config, in a folder that user may write)
    const etc = join(dir, "etc");
    mkdirSync(etc, { mode: 0o755 });
    chownSync(etc, DAEMON_UID, DAEMON_GID);
    const config = join(etc, "config.yaml");
    writeFileSync(config, "site_id: site-001\n", { mode: 0o644 });
    const r = spawnSync(release.node, [cli, "update", "apply", "--config", config, b], {
      encoding: "utf8",
      env: updateCliEnv(env, env.restartCmd),
    });
    assert.equal(r.status, 0, r.stdout + r.stderr);
    assert.equal(readFileSync(`${config}.checked-by-0.2.0`, "utf8"), String(DAEMON_UID), "check-config ran as the daemon's user");
    const backup = join(env.dataDir, "update", "backup-before-0.2.0.db");
    assert.equal(lstatSync(backup).uid, DAEMON_UID, "the backup was written as the data dir's owner");
    assert.equal(lstatSync(join(env.dataDir, "update")).uid, DAEMON_UID);
    const copy = new Database(backup, { readonly: true });
    assert.ok((copy.prepare("SELECT count(*) FROM schema_migrations").pluck().get() as number) > 0);
    copy.close();
  });
});

test("the highest release ever installed is the floor: after a rollback an older release needs --allow-downgrade", async () => {
  await withInstalled(async (env, dir) => {
    const key = env.keys.privateKey;
    let r = update(env, ["apply", await fakeBundle({ version: "0.2.0-rc.10", mode: "healthy", key, out: join(dir, "rc10") })]);
    assert.equal(r.status, 0, r.stderr);
    // the operator goes back to 0.1.0; the next start rolls back
    assert.equal(update(env, ["rollback"], { SITEGATE_RESTART_CMD: "" }).status, 0);
    update(env, ["check"]);
    assert.equal(currentVersion(env), "0.1.0");
    const rc9 = await fakeBundle({ version: "0.2.0-rc.9", mode: "healthy", key, out: join(dir, "rc9") });
    const before = snapshotTree(env.root);
    r = update(env, ["apply", rc9]);
    assert.equal(r.status, 2, r.stdout + r.stderr);
    assert.match(
      r.stderr,
      /refused: 0\.2\.0-rc\.9 is older than 0\.2\.0-rc\.10, the highest release installed here \(--allow-downgrade installs it\)/,
    );
    assert.equal(snapshotTree(env.root), before);
    assert.equal(state(env).highest, "0.2.0-rc.10");
    r = update(env, ["apply", "--allow-downgrade", rc9]);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(currentVersion(env), "0.2.0-rc.9");
    assert.equal(state(env).highest, "0.2.0-rc.10", "a downgrade does not lower the floor");
  });
});

test("downloads are capped and stay on https through redirects", async () => {
  await withInstalled(async (env, dir) => {
    const b = await fakeBundle({ version: "0.2.0", mode: "healthy", key: env.keys.privateKey, out: join(dir, "net.bundle"), padFiles: 4 });
    const bytes = readFileSync(b);
    const cert = testCert();
    const plain = createHttpServer((req, res) => res.end(bytes));
    await new Promise<void>((r) => plain.listen(0, "127.0.0.1", r));
    const plainPort = (plain.address() as AddressInfo).port;
    const server = createServer({ cert: cert.cert, key: cert.key }, (req, res) => {
      if (req.url === "/b") res.end(bytes);
      else if (req.url === "/chunked") {
        // no Content-Length: the cap holds while streaming
        res.writeHead(200, { "content-type": "application/octet-stream" });
        res.write(bytes.subarray(0, 1000));
        res.end(bytes.subarray(1000));
      } else if (req.url === "/to-http") res.writeHead(302, { location: `http://127.0.0.1:${plainPort}/b` }).end();
      else if (req.url === "/to-https") res.writeHead(301, { location: "/b" }).end();
      else if (req.url === "/loop") res.writeHead(302, { location: "/loop" }).end();
      else res.writeHead(404).end();
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const base = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const run = (args: string[]) => updateAsync(env, args, { NODE_EXTRA_CA_CERTS: cert.certFile });
    try {
      const before = snapshotTree(env.root);
      const cap = String(bytes.length - 1);
      for (const [args, message] of [
        [
          ["apply", `${base}/to-http`],
          new RegExp(`refused: ${base}/to-http redirects to http://127\\.0\\.0\\.1:${plainPort}/b; only https:// is followed`),
        ],
        [
          ["apply", "--max-size", cap, `${base}/b`],
          new RegExp(`refused: ${base}/b is ${bytes.length} bytes, more than ${cap} \\(--max-size\\)`),
        ],
        [
          ["apply", "--max-size", cap, `${base}/chunked`],
          new RegExp(`refused: ${base}/chunked is larger than ${cap} bytes \\(--max-size\\)`),
        ],
        [["apply", `${base}/loop`], /refused: more than 5 redirects/],
      ] as [string[], RegExp][]) {
        const r = await run(args);
        assert.equal(r.code, 2, `${args.join(" ")}: ${r.out}`);
        assert.match(r.out, message);
        assert.equal(snapshotTree(env.root), before, `${args.join(" ")}: the root changed`);
        assert.deepEqual(leftovers(env), []);
      }
      const r = await run(["apply", `${base}/to-https`]);
      assert.equal(r.code, 0, r.out);
      assert.equal(currentVersion(env), "0.2.0");
    } finally {
      server.close();
      plain.close();
    }
  });
});

test("keygen does not write through a symlink, dangling or not, and never overwrites a key", async () => {
  await withTmpDir(async (dir) => {
    const out = join(dir, "keys");
    mkdirSync(out, { mode: 0o700 });
    const target = join(dir, "planted");
    symlinkSync(target, join(out, "sitegate-update.key")); // dangling
    let r = spawnSync(process.execPath, [CLI, "update", "keygen", "--out", out], { encoding: "utf8" });
    assert.equal(r.status, 1, r.stdout + r.stderr);
    assert.match(r.stderr, /sitegate-update\.key is a symbolic link; not overwriting a key/);
    assert.ok(!existsSync(target), "the private key was written through the link");
    assert.deepEqual(readdirSync(out), ["sitegate-update.key"], "nothing else was created");
    // a fresh name works, and the private key is the owner's alone
    r = spawnSync(process.execPath, [CLI, "update", "keygen", "--out", out, "--name", "site"], { encoding: "utf8" });
    assert.equal(r.status, 0, r.stderr);
    assert.equal(statSync(join(out, "site.key")).mode & 0o777, 0o600);
    assert.match(readFileSync(join(out, "site.pub"), "utf8"), /BEGIN PUBLIC KEY/);
    r = spawnSync(process.execPath, [CLI, "update", "keygen", "--out", out, "--name", "site"], { encoding: "utf8" });
    assert.equal(r.status, 1);
    assert.match(r.stderr, /site\.key exists; not overwriting a key/);
  });
});
