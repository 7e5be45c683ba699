// The amd64 .deb, as an installer uses it, without touching this machine's own install
// (needs root, dpkg and unshare).
// 1. `make deb DEB_ARCHS=x64`, and lintian on it: no error.
// 2. test/support/deb-install-flow.ts in a throwaway root (test/support/throwaway-root.ts):
//    the README's install block line by line with the machine's real dpkg, the installed
//    gateway and simulator started from their units, the bench over the pty, purge.
// 3. Host safety: a `sitegate` package is installed on this machine while the flow runs
//    (the machine's own, untouched, or else a stand-in this test builds, installs and
//    purges), and its status, version, /etc/sitegate, /var/lib/sitegate, /opt/sitegate and
//    the users and groups are the same afterwards.
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { spawnSync } from "node:child_process";
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { inThrowawayRoot, throwawayRootUnavailable } from "../support/throwaway-root.js";

const ROOT = resolve(fileURLToPath(import.meta.url), "../../../..");
const VERSION = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string }).version;
const DEB = join(ROOT, "var", "pkg", `sitegate_${VERSION}_amd64.deb`);
const STAND_IN_VERSION = "0.0.0~host-safety-stand-in";
const have = (cmd: string) => spawnSync("sh", ["-c", `command -v ${cmd}`]).status === 0;
const why = throwawayRootUnavailable() || (!have("dpkg-deb") || !have("setpriv") ? "needs dpkg-deb and setpriv" : false);

function sh(cmd: string, args: string[], opts: { cwd?: string } = {}) {
  return spawnSync(cmd, args, { encoding: "utf8", ...opts });
}

/** A folder or file as text: every path, its type, mode, owner, and content hash or link target. */
function tree(path: string): string {
  if (!existsSync(path)) return `${path}: absent`;
  const out: string[] = [];
  const walk = (p: string) => {
    const st = lstatSync(p);
    const head = `${p} ${st.mode.toString(8)} ${st.uid}:${st.gid}`;
    if (st.isSymbolicLink()) out.push(`${head} -> ${readlinkSync(p)}`);
    else if (st.isFile()) out.push(`${head} ${createHash("sha256").update(readFileSync(p)).digest("hex")}`);
    else if (st.isDirectory()) {
      out.push(`${head} dir`);
      for (const e of readdirSync(p).sort()) walk(join(p, e));
    } else out.push(`${head} special`);
  };
  walk(path);
  return out.join("\n");
}

/** What a run must leave as it was: the package's status and version, its config and data, the accounts. */
function hostState(): string {
  const q = sh("dpkg-query", ["-W", "-f", "${Status} ${Version}", "sitegate"]);
  const pkg = q.status === 0 ? q.stdout : "not known to dpkg";
  return [`dpkg: ${pkg}`, ...["/etc/sitegate", "/var/lib/sitegate", "/opt/sitegate", "/etc/passwd", "/etc/group"].map(tree)].join("\n");
}

/** A package named sitegate with a conffile in /etc/sitegate and a database in /var/lib/sitegate, and nothing else. */
function standIn(dir: string): string {
  const root = join(dir, "stand-in");
  mkdirSync(join(root, "DEBIAN"), { recursive: true });
  mkdirSync(join(root, "etc", "sitegate"), { recursive: true });
  mkdirSync(join(root, "var", "lib", "sitegate"), { recursive: true });
  writeFileSync(
    join(root, "DEBIAN", "control"),
    `Package: sitegate\nVersion: ${STAND_IN_VERSION}\nArchitecture: all\nMaintainer: sitegate tests <tests@example.com>\nDescription: stand-in for the host-safety test\n This package is installed only while deb.test runs.\n`,
  );
  writeFileSync(join(root, "DEBIAN", "conffiles"), "/etc/sitegate/config.yaml\n");
  writeFileSync(join(root, "etc", "sitegate", "config.yaml"), "# the machine's own config: the package test must not change it\n");
  writeFileSync(join(root, "var", "lib", "sitegate", "sitegate.db"), createHash("sha256").update("data").digest());
  const deb = join(dir, "sitegate-stand-in.deb");
  const r = sh("dpkg-deb", ["--root-owner-group", "--build", root, deb]);
  assert.equal(r.status, 0, r.stderr);
  return deb;
}

const work = mkdtempSync(join(tmpdir(), "sitegate-deb-test-"));
let installedStandIn = false;
let original: string | undefined;
after(() => {
  // the machine goes back to exactly what it had: no sitegate, no /etc/sitegate, no /var/lib/sitegate
  if (installedStandIn && sh("dpkg-query", ["-W", "-f", "${Version}", "sitegate"]).stdout === STAND_IN_VERSION) {
    sh("dpkg", ["--purge", "sitegate"]);
  }
  rmSync(work, { recursive: true, force: true });
});

test("make deb (amd64): lintian reports no error", { skip: why, timeout: 900_000 }, () => {
  // a bench package: the update key is the development key make bundle generates
  const built = sh("make", ["--no-print-directory", "deb", "DEB_ARCHS=x64", "NO_BUILD=1", "DEV_UPDATE_KEY=1"], { cwd: ROOT });
  assert.equal(built.status, 0, `make deb: ${built.stderr.slice(-3000)}`);
  assert.ok(existsSync(DEB), DEB);
  assert.ok(have("lintian"), "lintian is missing (make test installs it; apt-get install lintian)");
  const l = sh("lintian", ["--tag-display-limit", "0", DEB]);
  const errors = l.stdout.split("\n").filter((line) => line.startsWith("E: "));
  assert.deepEqual(errors, [], `lintian:\n${l.stdout}${l.stderr}`);
});

test(
  "the amd64 .deb in a throwaway root: the install block line by line, the daemon as sitegate, the bench over the pty, purge; this machine's sitegate package, config and data stay as they were",
  { skip: why, timeout: 900_000 },
  async () => {
    assert.ok(existsSync(DEB), `${DEB} (built by the test before)`);
    original = hostState();
    // a machine with its own sitegate (or its leftovers) is only looked at, never changed
    if (sh("dpkg", ["-s", "sitegate"]).status !== 0 && !existsSync("/etc/sitegate") && !existsSync("/var/lib/sitegate")) {
      const r = sh("dpkg", ["-i", standIn(work)]);
      assert.equal(r.status, 0, `installing the stand-in: ${r.stderr}`);
      installedStandIn = true;
      assert.match(hostState(), /^dpkg: install ok installed 0\.0\.0~host-safety-stand-in$/m);
    }
    const before = hostState();

    const env: NodeJS.ProcessEnv = { ...process.env };
    // the flow's own node processes cover nothing of dist/src on this machine
    delete env.NODE_V8_COVERAGE;
    delete env.NODE_TEST_CONTEXT;
    const flow = join(ROOT, "dist", "test", "support", "deb-install-flow.js");
    const r = await inThrowawayRoot([process.execPath, flow, DEB], { env, timeoutMs: 600_000 });

    assert.equal(
      hostState(),
      before,
      "the machine's sitegate package, /etc/sitegate, /var/lib/sitegate, /opt/sitegate or accounts changed",
    );
    assert.equal(
      r.status,
      0,
      `the install flow in the throwaway root failed:\n--- stdout\n${r.stdout.slice(-4000)}\n--- stderr\n${r.stderr.slice(-6000)}`,
    );
    assert.match(r.stdout, /^ok: purge$/m);
  },
);

test("the stand-in goes: the machine is back to exactly what it had before the package test", { skip: why }, () => {
  assert.ok(original !== undefined, "the package test ran");
  if (installedStandIn) {
    const r = sh("dpkg", ["--purge", "sitegate"]);
    assert.equal(r.status, 0, r.stderr);
    installedStandIn = false;
  }
  assert.equal(hostState(), original);
});
