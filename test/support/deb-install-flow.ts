// The install of the .debs as an installer does it, run inside a throwaway root
// (test/support/throwaway-root.ts; deb.test.ts starts it): `node deb-install-flow.js DEB SIM_DEB`.
// 1. The install block of the README (or docs/install.md) run line by line as a script.
//    systemd is not PID 1 here, so `systemctl` is a shim (test/support/unit-runner.ts) that
//    runs the installed unit's ExecStartPre/ExecStart as its User= with setpriv. The block
//    ends with /healthz answering on 8443 (the namespace's own loopback). The gateway's
//    package alone carries nothing of the simulator.
// 2. The bench: the simulator's own package (sitegate-sim) added, its unit with the shipped
//    scenario, the shipped devices, and its drop-in for the gateway; the installed gateway
//    pairs the meter over the pty /run/sitegate-sim/ttyGW and its readings reach a partner sink.
// 3. `dpkg --purge sitegate-sim`: the simulator goes, the gateway stays whole; then
//    `dpkg --purge sitegate`: nothing is left but the system users (Debian policy).
// Before 1, it prints `found: <dpkg's status and version of sitegate>` (or `found: no sitegate
// package`) and purges an installed one: deb.test.ts installs a stand-in in a layer of the
// throwaway root below this flow's, and checks the flow met it.
// A failed check throws: the exit status is 1 and stderr says which.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, statSync, writeFileSync } from "node:fs";
import { get } from "node:https";
import { tmpdir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { gunzipSync } from "node:zlib";
import { parse, stringify } from "yaml";
import { startSink } from "./uplink-harness.js";
import { testCert } from "./tls.js";
import { until } from "./wait.js";
import { stopUnit } from "./unit-runner.js";

const ROOT = resolve(fileURLToPath(import.meta.url), "../../../..");
const VERSION = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string }).version;

/** What the simulator's package installs (and its purge removes). */
const SIM_FILES = [
  "/usr/bin/sitegate-sim",
  "/usr/lib/sitegate-sim",
  "/lib/systemd/system/sitegate-sim.service",
  "/lib/systemd/system/sitegate.service.d/sitegate-bench.conf",
  "/usr/lib/sysusers.d/sitegate-sim.conf",
  "/usr/share/sitegate/scenarios/bench.yaml",
  "/usr/share/sitegate/bench/devices.yaml",
  "/usr/share/man/man1/sitegate-sim.1.gz",
  "/usr/share/doc/sitegate-sim",
];

function sh(cmd: string, args: string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv } = {}) {
  return spawnSync(cmd, args, { encoding: "utf8", ...opts });
}

/** The shell lines between the install markers: README.md once it has them, else docs/install.md. */
export function installLines(): { file: string; lines: string[] } {
  for (const file of ["README.md", "docs/install.md"]) {
    const text = readFileSync(join(ROOT, file), "utf8");
    const m = /<!-- install:begin[^>]*-->\s*```sh\n([\s\S]*?)```\s*<!-- install:end -->/.exec(text);
    if (m)
      return {
        file,
        lines: m[1]
          .split("\n")
          .map((l) => l.replace(/\s+#.*$/, "").trim())
          .filter((l) => l && !l.startsWith("#")),
      };
  }
  throw new Error("no <!-- install:begin --> ```sh ... ``` <!-- install:end --> block in README.md or docs/install.md");
}

function healthz(port: number): Promise<{ status: number; body: string }> {
  return new Promise((ok, fail) => {
    get({ host: "127.0.0.1", port, path: "/healthz", rejectUnauthorized: false }, (res) => {
      let body = "";
      res.on("data", (d) => (body += d));
      res.on("end", () => ok({ status: res.statusCode ?? 0, body }));
    }).on("error", fail);
  });
}

/** The systemctl shim: a folder first on PATH whose `systemctl` is unit-runner.js. */
function makeShim(): { dir: string; env: NodeJS.ProcessEnv; log: (name: string) => string } {
  const dir = mkdtempSync(join(tmpdir(), "sitegate-systemctl-"));
  writeFileSync(
    join(dir, "systemctl"),
    `#!/bin/sh\nexec "${process.execPath}" "${join(ROOT, "dist/test/support/unit-runner.js")}" "${dir}" "$@"\n`,
    { mode: 0o755 },
  );
  const log = (name: string) =>
    existsSync(join(dir, `${name}.log`)) ? readFileSync(join(dir, `${name}.log`), "utf8").slice(-3000) : "(no log)";
  return { dir, env: { ...process.env, PATH: `${dir}:${process.env.PATH}`, DEBIAN_FRONTEND: "noninteractive" }, log };
}

type Shim = ReturnType<typeof makeShim>;

/** 1: the install block, as written, with this package in place of the arm64 one; then what the package and init made. */
async function install(deb: string, shim: Shim): Promise<void> {
  const { file, lines } = installLines();
  const script = lines.map((l) => l.replace(/^sudo\s+/, "").replace(/\.\/sitegate_\S+_arm64\.deb/, `./${basename(deb)}`)).join("\n");
  const r = sh("bash", ["-euo", "pipefail", "-c", script], { cwd: dirname(deb), env: shim.env });
  assert.equal(
    r.status,
    0,
    `${file} install block failed:\n${script}\n--- stdout\n${r.stdout.slice(-3000)}\n--- stderr\n${r.stderr.slice(-3000)}\n--- daemon\n${shim.log("sitegate")}`,
  );
  assert.match(r.stdout, /^api_key: \S{20,}$/m, "init prints the API key once");
  assert.match(r.stdout, /^password: \S{16,}$/m, "init prints the password once");
  assert.match(r.stdout, /config ok: \/etc\/sitegate\/config.yaml/);
  assert.match(r.stdout, /"status"\s*:\s*"ok"|"ok"\s*:\s*true|healthy/i, `healthz at the end of the block: ${r.stdout.slice(-500)}`);

  assert.equal(readlinkSync("/opt/sitegate/current"), `releases/${VERSION}`);
  const version = sh("/usr/bin/sitegate", ["--version"]);
  assert.match(version.stdout, new RegExp(`^sitegate ${VERSION.replace(/\./g, "\\.")} node 24\\.21\\.0 \\(abi 137\\) linux-x64$`, "m"));
  assert.match(version.stdout, /^update key: development \(\/etc\/sitegate\/update-keys\/sitegate-release\.pub\)/m);
  const gid = Number(sh("getent", ["group", "sitegate"]).stdout.split(":")[2]);
  const cfg = statSync("/etc/sitegate/config.yaml");
  assert.equal(cfg.mode & 0o777, 0o640);
  assert.equal(cfg.uid, 0);
  assert.equal(cfg.gid, gid, "config.yaml is root:sitegate");
  assert.match(sh("id", ["-nG", "sitegate"]).stdout, /\bdialout\b/);
  assert.match(sh("id", ["-nG", "sitegate"]).stdout, /\bgpio\b/, "the sitegate user may open /dev/gpiochip*");
  assert.match(readFileSync("/usr/lib/udev/rules.d/60-sitegate-gpio.rules", "utf8"), /GROUP="gpio"/);
  const state = statSync("/var/lib/sitegate");
  assert.equal(state.mode & 0o777, 0o750);
  assert.equal(state.gid, gid);
  assert.match(readFileSync("/etc/sitegate/config.yaml", "utf8"), /key_hash: scrypt\$/);
  assert.doesNotMatch(
    readFileSync("/etc/sitegate/config.yaml", "utf8"),
    new RegExp(/^api_key: (\S+)$/m.exec(r.stdout)![1]),
    "the clear API key is not stored",
  );
  // every file dpkg unpacked is as its md5sums say; the manual pages come from --help
  const verify = sh("dpkg", ["--verify", "sitegate"]);
  assert.equal(verify.status, 0, `dpkg --verify: ${verify.stdout}${verify.stderr}`);
  const man = gunzipSync(readFileSync("/usr/share/man/man1/sitegate.1.gz")).toString();
  assert.match(man, /^\.B check\\-config$/m, "the manual page has a section per command");
  if (spawnSync("sh", ["-c", "command -v systemd-analyze"]).status === 0) {
    const v = sh("systemd-analyze", ["verify", "/lib/systemd/system/sitegate.service"]);
    assert.doesNotMatch(v.stderr, /not executable|No such file/, v.stderr);
  }
  assert.equal((await healthz(8443)).status, 200);
  // the gateway's package carries nothing of the simulator (it is the package sitegate-sim)
  const files = sh("dpkg", ["-L", "sitegate"]).stdout.split("\n");
  assert.deepEqual(
    files.filter((f) => /hw-sim|sitegate-sim|sitegate-bench|^\/usr\/share\/sitegate\//.test(f)),
    [],
    "simulator files in the gateway's package",
  );
  for (const absent of SIM_FILES) assert.ok(!existsSync(absent), `${absent} with the gateway's package alone`);
  assert.ok(!existsSync("/opt/sitegate/current/dist/hw-sim"), "a simulator in the release");
}

/** 2a: the simulator's package, added as docs/install.md says, on the gateway's runtime. */
function addSim(simDeb: string, shim: Shim): void {
  const i = sh("dpkg", ["-i", simDeb], { env: shim.env });
  assert.equal(i.status, 0, `dpkg -i ${basename(simDeb)}: ${i.stdout}${i.stderr}`);
  const verify = sh("dpkg", ["--verify", "sitegate-sim"]);
  assert.equal(verify.status, 0, `dpkg --verify sitegate-sim: ${verify.stdout}${verify.stderr}`);
  for (const present of SIM_FILES) assert.ok(existsSync(present), `${present} after the simulator's package`);
  assert.match(sh("id", ["-nG", "sitegate"]).stdout, /\bsitegate-sim\b/, "the daemon's user is in the simulator's group");
  const help = sh("/usr/bin/sitegate-sim", ["--help"]);
  assert.match(help.stdout, /^usage: sitegate-sim --scenario FILE/m, `sitegate-sim --help: ${help.stderr}`);
  if (spawnSync("sh", ["-c", "command -v systemd-analyze"]).status === 0) {
    const v = sh("systemd-analyze", ["verify", "/lib/systemd/system/sitegate-sim.service", "/lib/systemd/system/sitegate.service"]);
    assert.doesNotMatch(v.stderr, /not executable|No such file/, v.stderr);
  }
}

/** 2: the bench, with the shipped scenario, devices and drop-in; the partner is the sink. */
async function bench(shim: Shim, sink: Awaited<ReturnType<typeof startSink>>): Promise<void> {
  sh("systemctl", ["stop", "sitegate"], { env: shim.env });
  const config = parse(readFileSync("/etc/sitegate/config.yaml", "utf8")) as Record<string, any>;
  const devices = parse(
    readFileSync("/usr/share/sitegate/bench/devices.yaml", "utf8").replaceAll("ORG/", `${config.organization_id}/`),
  ) as Record<string, any>;
  copyFileSync(testCert().certFile, "/etc/sitegate/sink-ca.pem");
  Object.assign(config, devices);
  config.partner = { ...config.partner, execution_url: `${sink.url}/exec`, data_push_url: sink.url, ca_file: "/etc/sitegate/sink-ca.pem" };
  writeFileSync("/etc/sitegate/config.yaml", stringify(config)); // an existing file keeps its mode and owner
  const ctl = (...args: string[]) => {
    const c = sh("systemctl", args, { env: shim.env });
    assert.equal(c.status, 0, `systemctl ${args.join(" ")}: ${c.stderr}\n${shim.log(args.at(-1)!)}`);
  };
  ctl("start", "sitegate-sim");
  await until(
    () => existsSync("/run/sitegate-sim/ttyGW"),
    `the simulator's pty /run/sitegate-sim/ttyGW (${shim.log("sitegate-sim")})`,
    60_000,
  );
  ctl("restart", "sitegate");
  const pushed = (id: string) => sink.pushed(id);
  await until(() => pushed("meter"), `readings of the RS-485 meter at the sink (daemon log: ${shim.log("sitegate")})`, 120_000);
  await until(() => pushed("battery"), "the TCP battery's readings", 60_000);
}

/** 3: the simulator's purge leaves the gateway whole; the gateway's leaves only what Debian policy keeps (the system users). */
function purge(shim: Shim): void {
  stopUnit("sitegate", shim.dir);
  stopUnit("sitegate-sim", shim.dir);
  const s = sh("dpkg", ["--purge", "sitegate-sim"]);
  assert.equal(s.status, 0, s.stderr);
  for (const left of [...SIM_FILES, "/run/sitegate-sim", "/lib/systemd/system/sitegate.service.d"])
    assert.ok(!existsSync(left), `${left} is left after the simulator's purge`);
  const verify = sh("dpkg", ["--verify", "sitegate"]);
  assert.equal(verify.status, 0, `the gateway after the simulator's purge: ${verify.stdout}${verify.stderr}`);
  assert.equal(readlinkSync("/opt/sitegate/current"), `releases/${VERSION}`);
  const p = sh("dpkg", ["--purge", "sitegate"]);
  assert.equal(p.status, 0, p.stderr);
  for (const left of [
    "/opt/sitegate",
    "/etc/sitegate",
    "/var/lib/sitegate",
    "/usr/lib/sitegate",
    "/usr/bin/sitegate",
    "/usr/bin/sitegate-sim",
    "/usr/share/man/man1/sitegate.1.gz",
    "/lib/systemd/system/sitegate.service",
    "/usr/lib/sysusers.d/sitegate.conf",
    "/usr/lib/udev/rules.d/60-sitegate-gpio.rules",
    "/usr/share/sitegate",
    "/etc/systemd/system/sitegate.service.d",
    "/etc/systemd/system/timers.target.wants/sitegate-update-check.timer",
    "/etc/systemd/system/paths.target.wants/sitegate-update-request.path",
    "/run/sitegate-sim",
  ]) {
    assert.ok(!existsSync(left), `${left} is left after purge`);
  }
  for (const dir of ["/var/lib/systemd/deb-systemd-helper-enabled", "/var/lib/systemd/deb-systemd-helper-masked"]) {
    const left = existsSync(dir) ? sh("find", [dir, "-name", "*sitegate*"]).stdout.trim() : "";
    assert.equal(left, "", `deb-systemd-helper state left after purge: ${left}`);
  }
  assert.equal(sh("getent", ["passwd", "sitegate"]).status, 0, "the system user stays (Debian policy)");
  assert.deepEqual(
    readdirSync("/var/lib/dpkg/info").filter((f) => f.startsWith("sitegate.") || f.startsWith("sitegate-sim.")),
    [],
    "dpkg forgot the packages",
  );
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const deb = resolve(process.argv[2]);
  const simDeb = resolve(process.argv[3]);
  const found = sh("dpkg-query", ["-W", "-f", "${Status} ${Version}", "sitegate"]);
  console.log(`found: ${found.status === 0 ? found.stdout : "no sitegate package"}`);
  for (const pkg of ["sitegate-sim", "sitegate"]) {
    // the throwaway root starts as a copy of the machine (and the stand-in): its packages go, in the copy only
    if (sh("dpkg", ["-s", pkg]).status === 0)
      assert.equal(sh("dpkg", ["--purge", pkg]).status, 0, `purging the ${pkg} found in the throwaway root`);
  }
  const shim = makeShim();
  const sink = await startSink();
  try {
    await install(deb, shim);
    console.log("ok: the install block, the package's files and the daemon's /healthz");
    addSim(simDeb, shim);
    console.log("ok: the simulator's package");
    await bench(shim, sink);
    console.log("ok: the bench over the pty, readings at the sink");
    purge(shim);
    console.log("ok: purge");
  } finally {
    stopUnit("sitegate", shim.dir);
    stopUnit("sitegate-sim", shim.dir);
    await sink.stop();
  }
}
