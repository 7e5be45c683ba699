// The amd64 .deb on this machine, as an installer would use it (needs root and dpkg).
// 1. `make deb DEB_ARCHS=x64`, then the install block of the README (or docs/packaging.md)
//    run line by line as a script. systemd is not PID 1 here, so `systemctl` is a shim
//    (test/support/unit-runner.ts) that runs the installed unit's ExecStartPre/ExecStart as
//    its User= with setpriv. The block ends with /healthz answering.
// 2. The bench: the installed simulator with its shipped scenario (sitegate-sim.service),
//    the shipped devices and drop-in; the installed gateway pairs the meter over the pty
//    /run/sitegate-sim/ttyGW and its readings reach a partner sink.
// 3. `dpkg --purge`: nothing is left but the system user (Debian policy).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync, statSync, writeFileSync } from "node:fs";
import { get } from "node:https";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parse, stringify } from "yaml";
import { startSink } from "../support/uplink-harness.js";
import { testCert } from "../support/tls.js";
import { until } from "../support/wait.js";
import { stopUnit } from "../support/unit-runner.js";

const ROOT = resolve(fileURLToPath(import.meta.url), "../../../..");
const VERSION = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string }).version;
const have = (cmd: string) => spawnSync("sh", ["-c", `command -v ${cmd}`]).status === 0;
const why =
  process.getuid?.() !== 0 ? "needs root (dpkg -i)" : !have("dpkg-deb") || !have("setpriv") ? "needs dpkg-deb and setpriv" : false;

function sh(cmd: string, args: string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv } = {}) {
  return spawnSync(cmd, args, { encoding: "utf8", ...opts });
}

/** The shell lines between the install markers: README.md once it has them, else docs/packaging.md. */
export function installLines(): { file: string; lines: string[] } {
  for (const file of ["README.md", "docs/packaging.md"]) {
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
  throw new Error("no <!-- install:begin --> ```sh ... ``` <!-- install:end --> block in README.md or docs/packaging.md");
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

function portFree(port: number): Promise<boolean> {
  return new Promise((ok) => {
    const s = createServer();
    s.once("error", () => ok(false));
    s.listen(port, "0.0.0.0", () => s.close(() => ok(true)));
  });
}

function purge(): void {
  if (sh("dpkg", ["-s", "sitegate"]).status === 0) sh("dpkg", ["--purge", "sitegate"]);
}

test(
  "the amd64 .deb: install steps line by line, daemon as sitegate, bench over the pty, purge",
  { skip: why, timeout: 900_000 },
  async (t) => {
    // a bench package: the update key is the development key make bundle generates
    const built = sh("make", ["--no-print-directory", "deb", "DEB_ARCHS=x64", "NO_BUILD=1", "DEV_UPDATE_KEY=1"], { cwd: ROOT });
    assert.equal(built.status, 0, `make deb: ${built.stderr.slice(-3000)}`);
    const deb = join(ROOT, "var", "pkg", `sitegate_${VERSION}_amd64.deb`);
    assert.ok(existsSync(deb), deb);
    purge();
    assert.ok(await portFree(8443), "port 8443 (the config init writes) is in use on this machine");

    const shim = mkdtempSync(join(tmpdir(), "sitegate-systemctl-"));
    writeFileSync(
      join(shim, "systemctl"),
      `#!/bin/sh\nexec "${process.execPath}" "${join(ROOT, "dist/test/support/unit-runner.js")}" "${shim}" "$@"\n`,
      { mode: 0o755 },
    );
    const sink = await startSink();
    t.after(async () => {
      stopUnit("sitegate", shim);
      stopUnit("sitegate-sim", shim);
      await sink.stop();
      purge();
      rmSync(shim, { recursive: true, force: true });
    });

    // 1. the install block, as written, with this machine's package in place of the arm64 one
    const { file, lines } = installLines();
    const script = lines.map((l) => l.replace(/^sudo\s+/, "").replace(/\.\/sitegate_\S+_arm64\.deb/, `./${basename(deb)}`)).join("\n");
    const r = sh("bash", ["-euo", "pipefail", "-c", script], {
      cwd: dirname(deb),
      env: { ...process.env, PATH: `${shim}:${process.env.PATH}`, DEBIAN_FRONTEND: "noninteractive" },
    });
    const log = (name: string) =>
      existsSync(join(shim, `${name}.log`)) ? readFileSync(join(shim, `${name}.log`), "utf8").slice(-3000) : "(no log)";
    assert.equal(
      r.status,
      0,
      `${file} install block failed:\n${script}\n--- stdout\n${r.stdout.slice(-3000)}\n--- stderr\n${r.stderr.slice(-3000)}\n--- daemon\n${log("sitegate")}`,
    );
    assert.match(r.stdout, /^api_key: \S{20,}$/m, "init prints the API key once");
    assert.match(r.stdout, /^password: \S{16,}$/m, "init prints the password once");
    assert.match(r.stdout, /config ok: \/etc\/sitegate\/config.yaml/);
    assert.match(r.stdout, /"status"\s*:\s*"ok"|"ok"\s*:\s*true|healthy/i, `healthz at the end of the block: ${r.stdout.slice(-500)}`);

    // what the package and init made
    assert.equal(readlinkSync("/opt/sitegate/current"), `releases/${VERSION}`);
    const version = sh("/usr/bin/sitegate", ["--version"]);
    assert.match(version.stdout, new RegExp(`^sitegate ${VERSION.replace(/\./g, "\\.")} node 24\\.21\\.0 \\(abi 137\\) linux-x64$`, "m"));
    const gid = Number(sh("getent", ["group", "sitegate"]).stdout.split(":")[2]);
    const cfg = statSync("/etc/sitegate/config.yaml");
    assert.equal(cfg.mode & 0o777, 0o640);
    assert.equal(cfg.uid, 0);
    assert.equal(cfg.gid, gid, "config.yaml is root:sitegate");
    assert.match(sh("id", ["-nG", "sitegate"]).stdout, /\bdialout\b/);
    assert.match(sh("id", ["-nG", "sitegate"]).stdout, /\bgpio\b/, "the sitegate user may open /dev/gpiochip*");
    assert.match(readFileSync("/usr/lib/udev/rules.d/60-sitegate-gpio.rules", "utf8"), /GROUP="gpio"/);
    assert.match(version.stdout, /^update key: development \(\/etc\/sitegate\/update-keys\/sitegate-release\.pub\)/m);
    const state = statSync("/var/lib/sitegate");
    assert.equal(state.mode & 0o777, 0o750);
    assert.equal(state.gid, gid);
    assert.match(readFileSync("/etc/sitegate/config.yaml", "utf8"), /key_hash: scrypt\$/);
    assert.doesNotMatch(
      readFileSync("/etc/sitegate/config.yaml", "utf8"),
      new RegExp(/^api_key: (\S+)$/m.exec(r.stdout)![1]),
      "the clear API key is not stored",
    );
    if (have("systemd-analyze")) {
      const v = sh("systemd-analyze", ["verify", "/lib/systemd/system/sitegate.service", "/lib/systemd/system/sitegate-sim.service"]);
      assert.doesNotMatch(v.stderr, /not executable|No such file/, v.stderr);
    }
    assert.equal((await healthz(8443)).status, 200);

    // 2. the bench: shipped scenario, devices and drop-in; the partner is the sink
    sh("systemctl", ["stop", "sitegate"], { env: { ...process.env, PATH: `${shim}:${process.env.PATH}` } });
    const config = parse(readFileSync("/etc/sitegate/config.yaml", "utf8")) as Record<string, any>;
    const bench = parse(
      readFileSync("/usr/share/sitegate/bench/devices.yaml", "utf8").replaceAll("ORG/", `${config.organization_id}/`),
    ) as Record<string, any>;
    copyFileSync(testCert().certFile, "/etc/sitegate/sink-ca.pem");
    Object.assign(config, bench);
    config.partner = {
      ...config.partner,
      execution_url: `${sink.url}/exec`,
      data_push_url: sink.url,
      ca_file: "/etc/sitegate/sink-ca.pem",
    };
    writeFileSync("/etc/sitegate/config.yaml", stringify(config)); // an existing file keeps its mode and owner
    mkdirSync("/etc/systemd/system/sitegate.service.d", { recursive: true });
    copyFileSync("/usr/share/sitegate/bench/sitegate-bench.conf", "/etc/systemd/system/sitegate.service.d/sitegate-bench.conf");
    const ctl = (...args: string[]) => {
      const c = sh("systemctl", args, { env: { ...process.env, PATH: `${shim}:${process.env.PATH}` } });
      assert.equal(c.status, 0, `systemctl ${args.join(" ")}: ${c.stderr}\n${log(args.at(-1)!)}`);
    };
    ctl("start", "sitegate-sim");
    await until(
      () => existsSync("/run/sitegate-sim/ttyGW"),
      `the simulator's pty /run/sitegate-sim/ttyGW (${log("sitegate-sim")})`,
      60_000,
    );
    ctl("restart", "sitegate");
    const pushed = (id: string) =>
      sink
        .accepted()
        .some((q) =>
          (q.body?.devices ?? []).some(
            (d: { device_id: string; metrics?: Record<string, unknown> }) => d.device_id === id && Object.keys(d.metrics ?? {}).length > 0,
          ),
        );
    await until(() => pushed("meter"), `readings of the RS-485 meter at the sink (daemon log: ${log("sitegate")})`, 120_000);
    assert.ok(pushed("battery") || (await until(() => pushed("battery"), "the TCP battery's readings", 60_000).then(() => true)));

    // 3. purge: only what Debian policy keeps (the system user)
    stopUnit("sitegate", shim);
    stopUnit("sitegate-sim", shim);
    const p = sh("dpkg", ["--purge", "sitegate"]);
    assert.equal(p.status, 0, p.stderr);
    for (const left of [
      "/opt/sitegate",
      "/etc/sitegate",
      "/var/lib/sitegate",
      "/usr/lib/sitegate",
      "/usr/bin/sitegate",
      "/usr/bin/sitegate-sim",
      "/lib/systemd/system/sitegate.service",
      "/usr/lib/sysusers.d/sitegate.conf",
      "/usr/lib/udev/rules.d/60-sitegate-gpio.rules",
      "/usr/share/sitegate",
      "/etc/systemd/system/sitegate.service.d",
      "/etc/systemd/system/timers.target.wants/sitegate-update-check.timer",
      "/run/sitegate-sim",
    ]) {
      assert.ok(!existsSync(left), `${left} is left after purge`);
    }
    assert.equal(sh("getent", ["passwd", "sitegate"]).status, 0, "the system user stays (Debian policy)");
  },
);
