// The amd64 .debs (the gateway's, sitegate, and the bench simulator's, sitegate-sim), as an
// installer uses them, without touching this machine's own install (needs root, dpkg and unshare).
// 1. `make deb DEB_ARCHS=x64`, and lintian on both: no error.
// 2. test/support/deb-install-flow.ts in a throwaway root (test/support/throwaway-root.ts):
//    the README's install block line by line with the machine's real dpkg (the gateway alone:
//    no simulator file), then the simulator's package added, both started from their units,
//    the bench over the pty, the simulator's purge, then the gateway's.
// 3. Host safety: the flow meets an installed `sitegate` package (the machine's own, or else
//    a stand-in this test builds and installs into a layer of the throwaway root under the
//    flow's, never on this machine), and this machine is only read: dpkg's status file,
//    /etc/sitegate, /var/lib/sitegate, /opt/sitegate, /etc/passwd and /etc/group (content,
//    mode, owner, mtime) are the same after the flow, and after the whole file, as before it.
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { spawnSync } from "node:child_process";
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { inThrowawayRoot, throwawayRootUnavailable } from "../support/throwaway-root.js";

const ROOT = resolve(fileURLToPath(import.meta.url), "../../../..");
const VERSION = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string }).version;
const DEB = join(ROOT, "var", "pkg", `sitegate_${VERSION}_amd64.deb`);
const SIM_DEB = join(ROOT, "var", "pkg", `sitegate-sim_${VERSION}_amd64.deb`);
const STAND_IN_VERSION = "0.0.0~host-safety-stand-in";
/** The last release whose gateway package carried the simulator's files. */
const LAST_WITH_SIM = "0.1.0";
const have = (cmd: string) => spawnSync("sh", ["-c", `command -v ${cmd}`]).status === 0;
const why = throwawayRootUnavailable() || (!have("dpkg-deb") || !have("setpriv") ? "needs dpkg-deb and setpriv" : false);

function sh(cmd: string, args: string[], opts: { cwd?: string } = {}) {
  return spawnSync(cmd, args, { encoding: "utf8", ...opts });
}

/** A folder or file as text: every path, its type, mode, owner, mtime, and content hash or link target. */
function tree(path: string): string {
  if (!existsSync(path)) return `${path}: absent`;
  const out: string[] = [];
  const walk = (p: string) => {
    const st = lstatSync(p, { bigint: true });
    const head = `${p} ${st.mode.toString(8)} ${st.uid}:${st.gid} mtime ${st.mtimeNs}`;
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

/** dpkg's status and version of sitegate, as the flow prints it after `found: `. */
function sitegateStatus(): string {
  const q = sh("dpkg-query", ["-W", "-f", "${Status} ${Version}", "sitegate"]);
  return q.status === 0 ? q.stdout : "no sitegate package";
}

const HOST_PATHS = ["/var/lib/dpkg/status", "/etc/sitegate", "/var/lib/sitegate", "/opt/sitegate", "/etc/passwd", "/etc/group"];
const DPKG_LOG = "/var/log/dpkg.log";

/** What the test must leave as it was: the package's status, dpkg's whole database, the package's config and data, the accounts. */
function hostState(): string {
  return [`dpkg: ${sitegateStatus()}`, ...HOST_PATHS.map(tree)].join("\n");
}

/** The lines of two host states that differ, and what dpkg logged meanwhile (an apt-get of another's shows there too). */
function hostChange(before: string, after: string, logFrom: number): string {
  const was = new Set(before.split("\n"));
  const is = new Set(after.split("\n"));
  const log = existsSync(DPKG_LOG) ? readFileSync(DPKG_LOG) : Buffer.alloc(0);
  return [
    ...[...was].filter((l) => !is.has(l)).map((l) => `- ${l}`),
    ...[...is].filter((l) => !was.has(l)).map((l) => `+ ${l}`),
    `${DPKG_LOG} meanwhile:`,
    log.length >= logFrom ? log.subarray(logFrom).toString().slice(-3000) : "(rotated)",
  ].join("\n");
}

/** A package named sitegate with a conffile in /etc/sitegate and a database in /var/lib/sitegate, and nothing else. */
function standIn(dir: string): string {
  const root = join(dir, "stand-in");
  mkdirSync(join(root, "DEBIAN"), { recursive: true });
  mkdirSync(join(root, "etc", "sitegate"), { recursive: true });
  mkdirSync(join(root, "var", "lib", "sitegate"), { recursive: true });
  writeFileSync(
    join(root, "DEBIAN", "control"),
    `Package: sitegate\nVersion: ${STAND_IN_VERSION}\nArchitecture: all\nMaintainer: sitegate tests <tests@example.com>\nDescription: stand-in for the host-safety test\n deb.test installs it in a throwaway root only, never on the machine.\n`,
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
// before anything of this file runs: the last test compares the machine with it
const hostAtStart = hostState();
const logAtStart = existsSync(DPKG_LOG) ? statSync(DPKG_LOG).size : 0;
after(() => rmSync(work, { recursive: true, force: true }));

test(
  "make deb (amd64): the gateway's package and the simulator's; lintian reports no error in either",
  { skip: why, timeout: 900_000 },
  () => {
    // a bench package: the update key is the development key make bundle generates
    const built = sh("make", ["--no-print-directory", "deb", "DEB_ARCHS=x64", "NO_BUILD=1", "DEV_UPDATE_KEY=1"], { cwd: ROOT });
    assert.equal(built.status, 0, `make deb: ${built.stderr.slice(-3000)}`);
    assert.ok(have("lintian"), "lintian is missing (make test installs it; apt-get install lintian)");
    for (const deb of [DEB, SIM_DEB]) {
      assert.ok(existsSync(deb), deb);
      const l = sh("lintian", ["--tag-display-limit", "0", deb]);
      const errors = l.stdout.split("\n").filter((line) => line.startsWith("E: "));
      assert.deepEqual(errors, [], `lintian ${deb}:\n${l.stdout}${l.stderr}`);
    }
    // the simulator runs on the gateway's runtime and modules, of the same version
    const depends = sh("dpkg-deb", ["-f", SIM_DEB, "Depends"]).stdout;
    assert.match(depends, new RegExp(`^sitegate \\(= ${VERSION.replace(/\./g, "\\.")}\\),`));
    // 0.1.0's gateway package carried the simulator: installing sitegate-sim on a box with it
    // must take those files over (Replaces) and upgrade that gateway first (Breaks)
    for (const field of ["Replaces", "Breaks"]) {
      const value = sh("dpkg-deb", ["-f", SIM_DEB, field]).stdout.trim();
      const below = /^sitegate \(<< (\S+)\)$/.exec(value)?.[1];
      assert.ok(below, `${field}: ${value}`);
      assert.equal(
        sh("dpkg", ["--compare-versions", LAST_WITH_SIM, "lt", below]).status,
        0,
        `${field} covers sitegate ${LAST_WITH_SIM}: ${value}`,
      );
      assert.equal(
        sh("dpkg", ["--compare-versions", below, "le", VERSION]).status,
        0,
        `${field} leaves this release's sitegate alone: ${value}`,
      );
    }
  },
);

test(
  "the amd64 .debs in a throwaway root: the install block line by line (no simulator file), the daemon as sitegate, then sitegate-sim and the bench over the pty, purge of each; this machine's sitegate package, config and data stay as they were",
  { skip: why, timeout: 900_000 },
  async () => {
    assert.ok(existsSync(DEB) && existsSync(SIM_DEB), `${DEB} and ${SIM_DEB} (built by the test before)`);
    // the flow meets an installed sitegate: the machine's own (or its leftovers, only looked
    // at), or else the stand-in, installed by dpkg into a layer of the throwaway root below
    // the flow's writable one; this machine is only read
    const own = sitegateStatus();
    const leftovers = existsSync("/etc/sitegate") || existsSync("/var/lib/sitegate");
    const prepare = own === "no sitegate package" && !leftovers ? ["dpkg", "-i", standIn(work)] : undefined;
    const before = hostState();
    const logBefore = existsSync(DPKG_LOG) ? statSync(DPKG_LOG).size : 0;

    const env: NodeJS.ProcessEnv = { ...process.env };
    // the flow's own node processes cover nothing of dist/src on this machine
    delete env.NODE_V8_COVERAGE;
    delete env.NODE_TEST_CONTEXT;
    const flow = join(ROOT, "dist", "test", "support", "deb-install-flow.js");
    const r = await inThrowawayRoot([process.execPath, flow, DEB, SIM_DEB], { env, timeoutMs: 600_000, prepare });

    const afterFlow = hostState();
    assert.equal(
      afterFlow,
      before,
      `the flow changed this machine's dpkg database, sitegate package, /etc/sitegate, /var/lib/sitegate, /opt/sitegate or accounts:\n${hostChange(before, afterFlow, logBefore)}`,
    );
    assert.equal(
      r.status,
      0,
      `the install flow in the throwaway root failed:\n--- stdout\n${r.stdout.slice(-4000)}\n--- stderr\n${r.stderr.slice(-6000)}`,
    );
    // what the flow found installed and purged first: the stand-in, in the layer under it
    const found = /^found: (.*)$/m.exec(r.stdout)?.[1];
    assert.equal(found, prepare ? `install ok installed ${STAND_IN_VERSION}` : own, `the flow's first line: ${r.stdout.slice(0, 300)}`);
    assert.match(r.stdout, /^ok: purge$/m);
  },
);

test("this machine is as it was before the package test file: dpkg's database, sitegate's folders, the accounts", () => {
  const now = hostState();
  assert.equal(now, hostAtStart, `the package test changed this machine:\n${hostChange(hostAtStart, now, logAtStart)}`);
});
