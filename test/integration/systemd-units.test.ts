// The unit files: systemd-analyze verify and security (the exposure scores of
// docs/security.md, Unit hardening are ceilings here), the hardening lines, and the daemon actually
// running under the unit's kernel sandbox. systemd is not PID 1 in the test environment,
// so test/support/unit-sandbox.py applies what systemd would (the unit's SystemCallFilter
// groups, SystemCallErrorNumber, MemoryDenyWriteExecute, ProcSubset/ProtectProc) through
// libseccomp and a private /proc, then execs the unit's node command line.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, readlinkSync, statSync, writeFileSync } from "node:fs";
import { createServer } from "node:https";
import type { AddressInfo } from "node:net";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Agent, request } from "undici";
import { stringify } from "yaml";
import { withTmpDir } from "../support/tmp.js";
import { withSite, tcpScenario } from "../support/site.js";
import { tcpDevice } from "../support/gateway.js";
import { testConfigInput } from "../support/config.js";
import { testCert } from "../support/tls.js";
import { freePort } from "../support/net.js";
import { until } from "../support/wait.js";
import { CLI, unitCommand } from "../support/site50.js";
import { fakeBundle, requestConfig, updateCliEnv, withInstalled } from "../support/ota.js";
import { STOP_BUDGET_MS, STOP_EXIT_MS } from "../../src/lifecycle.js";

const ROOT = resolve(fileURLToPath(import.meta.url), "../../../..");
const dir = join(ROOT, "systemd");
const SANDBOX = join(ROOT, "test/support/unit-sandbox.py");
const units = readdirSync(dir).filter((f) => f.endsWith(".service"));
/** Ceilings of `systemd-analyze security` (systemd 252, Debian 12 / Raspberry Pi OS bookworm). */
const MAX_EXPOSURE: Record<string, number> = {
  "sitegate.service": 1.7,
  "sitegate-update-check.service": 0.9,
  "sitegate-update-request.service": 2.0,
  // Its own user and the daemon's sandbox, loopback only (it scored 5.0 as the daemon's user).
  "sitegate-sim.service": 1.2,
};

const lines = (unit: string) => readFileSync(join(dir, unit), "utf8").split("\n");

test("systemd-analyze is installed (make deps installs the systemd package)", () => {
  const r = spawnSync("systemd-analyze", ["--version"], { encoding: "utf8" });
  assert.equal(r.status, 0, `systemd-analyze is missing: ${r.error?.message ?? r.stderr}`);
});

test("every unit file passes systemd-analyze verify", () => {
  assert.ok(units.includes("sitegate.service"));
  for (const u of units) {
    const r = spawnSync("systemd-analyze", ["verify", join(dir, u)], { encoding: "utf8" });
    // The release's own runtime (/opt/sitegate/{current,previous}/node/bin/node) exists only
    // where the package is installed: test/integration/deb.test.ts verifies the installed units.
    const problems = r.stderr
      .split("\n")
      .filter((l) => l.trim() && !/Command \/opt\/sitegate\/(current|previous)\/node\/bin\/node is not executable/.test(l));
    assert.deepEqual(problems, [], `${u}: ${r.stderr}`);
    if (problems.length === 0 && r.status !== 0) assert.match(r.stderr, /\/opt\/sitegate\//, `${u}: exit ${r.status}`);
  }
});

test("systemd-analyze security: both services within their exposure ceilings", () => {
  for (const [u, max] of Object.entries(MAX_EXPOSURE)) {
    const r = spawnSync("systemd-analyze", ["security", "--offline=true", "--no-pager", join(dir, u)], { encoding: "utf8" });
    const m = /Overall exposure level for \S+: (\d+\.\d)/.exec(r.stdout + r.stderr);
    assert.ok(m, `${u}: no score in ${r.stdout}${r.stderr}`);
    assert.ok(
      Number(m[1]) <= max,
      `${u} scores ${m[1]}, over ${max}:\n${r.stdout
        .split("\n")
        .filter((l) => l.includes("✗"))
        .join("\n")}`,
    );
  }
});

test("the gateway unit is hardened: own user, dialout, strict filesystem, syscall filter, W^X, /proc subset, RS-485 HAT ports", () => {
  const text = lines("sitegate.service");
  for (const line of [
    "User=sitegate",
    "SupplementaryGroups=dialout gpio",
    "ProtectSystem=strict",
    "StateDirectory=sitegate",
    "Restart=always",
    "NoNewPrivileges=yes",
    "SystemCallFilter=@system-service",
    "SystemCallFilter=~@privileged @resources",
    "SystemCallErrorNumber=EPERM",
    "MemoryDenyWriteExecute=yes",
    "ProcSubset=pid",
    "DeviceAllow=char-ttySC rw",
  ]) {
    assert.ok(text.includes(line), `missing ${line}`);
  }
  // Every node the sandbox runs is interpreter only: V8's JIT cannot work without W^X exceptions.
  for (const l of text.filter((x) => /^ExecStart(Pre)?=[-+]*\/usr\/bin\/node /.test(x) && !x.startsWith("ExecStartPre=-+"))) {
    assert.match(l, / --jitless /, `${l} runs under MemoryDenyWriteExecute`);
  }
  const check = lines("sitegate-update-check.service");
  for (const line of [
    "NoNewPrivileges=yes",
    "ProtectSystem=strict",
    "PrivateNetwork=yes",
    "CapabilityBoundingSet=CAP_DAC_READ_SEARCH",
    "MemoryDenyWriteExecute=yes",
    "SystemCallFilter=~@privileged @resources",
  ]) {
    assert.ok(check.includes(line), `update check unit: missing ${line}`);
  }
  assert.match(
    check.find((l) => l.startsWith("ExecStart="))!,
    / --jitless /,
  );
});

test("the fleet's update request unit: few capabilities, private /proc, private files, no @resources", () => {
  const text = lines("sitegate-update-request.service");
  for (const line of [
    "CapabilityBoundingSet=CAP_DAC_READ_SEARCH CAP_DAC_OVERRIDE",
    "ProtectProc=invisible",
    "UMask=0077",
    "PrivateMounts=yes",
    "SystemCallFilter=~@privileged @resources",
    "StateDirectory=sitegate-update",
    "StateDirectoryMode=0700",
    "MemoryDenyWriteExecute=yes",
  ]) {
    assert.ok(text.includes(line), `update request unit: missing ${line}`);
  }
});

test("the simulator runs as its own user, never the daemon's; the daemon's user is in its group, which holds the gateway's end of the pty", () => {
  const text = lines("sitegate-sim.service");
  assert.ok(text.includes("User=sitegate-sim") && text.includes("Group=sitegate-sim"), text.join("\n"));
  assert.ok(!text.some((l) => /^(User|Group|SupplementaryGroups)=.*\bsitegate\b(?!-)/.test(l)), "nothing of the daemon's user or group");
  // the simulator's own package (sitegate-sim) brings its user; the gateway's has none of it
  const sysusers = readFileSync(join(ROOT, "packaging/sim/sysusers.conf"), "utf8").split("\n");
  assert.ok(!/sitegate-sim/.test(readFileSync(join(ROOT, "packaging/sysusers.conf"), "utf8")), "the gateway's sysusers.d");
  assert.ok(sysusers.some((l) => /^u sitegate-sim - /.test(l)));
  assert.ok(sysusers.includes("m sitegate sitegate-sim"), "the daemon may open the pty's gateway end");
  assert.ok(!sysusers.includes("m sitegate-sim sitegate"), "the simulator may not read the daemon's config or state");
  assert.match(readFileSync(join(ROOT, "packaging/sim/postinst"), "utf8"), /adduser sitegate sitegate-sim/, "without systemd-sysusers too");
});

test("the simulator makes its pty pair under its unit's syscall filter; the gateway's end is 0660 in the simulator's group", async () => {
  await withTmpDir(async (tmp) => {
    writeFileSync(
      join(tmp, "s.yaml"),
      stringify({
        seed: 1,
        control: { listen: "127.0.0.1:0" },
        ports: [{ kind: "rtu", path: "ttySIM", peer: "ttyGW", baud: 9600, devices: [{ unit: 10, model: "sdm630", name: "meter" }] }],
      }),
    );
    const sim = join(ROOT, "hw-sim/dist/hw-sim/cli.js"); // the simulator's package as it ships
    const child = sandboxed("sitegate-sim.service", [process.execPath, sim, "--scenario", join(tmp, "s.yaml"), "--base-dir", tmp]);
    const done = finished(child);
    const died = done.then((r) => Promise.reject(new Error(`the simulator exited under its sandbox: ${r.out}`)));
    died.catch(() => {}); // raced below; after the kill at the end it is expected
    try {
      await Promise.race([until(() => existsSync(join(tmp, "ttyGW")), "the gateway's end of the pty", 30_000), died]);
      const st = statSync(join(tmp, "ttyGW"));
      assert.equal(st.mode & 0o777, 0o660);
      assert.equal(st.gid, process.getgid!(), "the simulator's own group");
    } finally {
      child.kill("SIGTERM");
      await done;
    }
  });
});

test("GPIO works under the shipped unit: the chips' device class, the gpio group from sysusers.d, a udev rule that gives it the chips", () => {
  const text = lines("sitegate.service");
  assert.ok(text.includes("DevicePolicy=closed"));
  assert.ok(text.includes("DeviceAllow=char-gpiochip rw"), "DevicePolicy=closed shuts /dev/gpiochip* without char-gpiochip");
  assert.ok(text.includes("SupplementaryGroups=dialout gpio"));
  const sysusers = readFileSync(join(ROOT, "packaging/sysusers.conf"), "utf8").split("\n");
  assert.ok(
    sysusers.some((l) => /^g gpio\b/.test(l)),
    "sysusers.d makes the gpio group (Debian has none)",
  );
  assert.ok(sysusers.includes("m sitegate gpio"));
  const rule = readFileSync(join(ROOT, "packaging/60-sitegate-gpio.rules"), "utf8");
  assert.match(rule, /^SUBSYSTEM=="gpio", KERNEL=="gpiochip\[0-9\]\*", GROUP="gpio", MODE="0660"$/m);
  assert.match(readFileSync(join(ROOT, "packaging/build-deb.sh"), "utf8"), /60-sitegate-gpio\.rules" "\$root\/usr\/lib\/udev\/rules\.d\//);
});

test("the gateway unit: journal identifier, a stop timeout above the stop budget, serial classes the kernel knows at start", () => {
  const text = lines("sitegate.service");
  assert.ok(text.includes("SyslogIdentifier=sitegate"), "journalctl -t sitegate finds the lines");
  const stop = text.filter((l) => l.startsWith("TimeoutStopSec="));
  assert.equal(stop.length, 1);
  const stopS = Number(/^TimeoutStopSec=(\d+)s?$/.exec(stop[0])?.[1]);
  assert.ok(stopS * 1000 >= STOP_BUDGET_MS, `TimeoutStopSec ${stopS} s is at least the stop budget (${STOP_BUDGET_MS} ms)`);
  assert.ok(
    stopS * 1000 > STOP_EXIT_MS,
    `and above the daemon's own exit bound (${STOP_EXIT_MS} ms): systemd never SIGKILLs a stop in progress`,
  );
  // systemd resolves a class from /proc/devices when the unit starts: USB classes exist
  // then only if their drivers are loaded at boot, which modules-load.d does.
  const classes = text.flatMap((l) => /^DeviceAllow=char-(tty\S+) rw$/.exec(l)?.[1] ?? []).sort();
  assert.deepEqual(classes, ["ttyACM", "ttyAMA", "ttyS", "ttySC", "ttyUSB"]);
  const modules = readFileSync(join(ROOT, "packaging/modules-load.conf"), "utf8")
    .split("\n")
    .filter((l) => l.trim() && !l.startsWith("#"));
  // ttyUSB: usbserial and the usual adapter chips; ttyACM: cdc_acm. ttyS and ttyAMA are built in, ttySC comes with its overlay.
  assert.deepEqual(modules, ["usbserial", "ftdi_sio", "cp210x", "ch341", "pl2303", "cdc_acm"]);
  const build = readFileSync(join(ROOT, "packaging/build-deb.sh"), "utf8");
  assert.match(build, /install -m 644 "\$here\/modules-load\.conf" "\$root\/usr\/lib\/modules-load\.d\/sitegate\.conf"/);
});

/** Runs a command under a unit's sandbox in a private mount namespace (for its /proc). */
function sandboxed(unit: string, argv: string[], env: Record<string, string> = {}) {
  return spawn("unshare", ["--mount", "--propagation", "private", "python3", SANDBOX, join(dir, unit), "--", ...argv], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ...env },
  });
}

async function finished(child: ReturnType<typeof sandboxed>): Promise<{ code: number | null; signal: string | null; out: string }> {
  let out = "";
  child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (out += d.toString()));
  return new Promise((r) => child.once("exit", (code, signal) => r({ code, signal, out })));
}

test("the sandbox is real: node with its JIT dies under MemoryDenyWriteExecute, setpriority (@resources) and chown (@privileged) get EPERM, /proc has only processes", async () => {
  const jit = await finished(
    sandboxed("sitegate.service", [process.execPath, "-e", "let s = 0; for (let i = 0; i < 1e6; i++) s += i; console.log(s)"]),
  );
  assert.ok(jit.code !== 0 || jit.signal !== null, `node with its JIT ran under the sandbox: ${jit.out}`);
  await withTmpDir(async (tmp) => {
    const probe = `
      const fs = require("fs"), os = require("os");
      const code = (f) => { try { f(); return "ok"; } catch (e) { return e.info?.code ?? e.code; } };
      fs.writeFileSync(${JSON.stringify(join(tmp, "f"))}, "");
      console.log(JSON.stringify({
        setpriority: code(() => os.setPriority(10)),
        chown: code(() => fs.chownSync(${JSON.stringify(join(tmp, "f"))}, process.getuid(), process.getgid())),
        meminfo: fs.existsSync("/proc/meminfo"),
        self: fs.existsSync("/proc/self/status"),
      }));`;
    const r = await finished(sandboxed("sitegate.service", [process.execPath, "--jitless", "-e", probe]));
    assert.equal(r.code, 0, r.out);
    assert.deepEqual(JSON.parse(r.out.split("\n").find((l) => l.startsWith("{"))!), {
      setpriority: "EPERM",
      chown: "EPERM",
      meminfo: false,
      self: true,
    });
  });
});

/** Whether a process runs on jemalloc. */
function onJemalloc(pid: number): boolean {
  return /\/libjemalloc\.so\.2$/m.test(readFileSync(`/proc/${pid}/maps`, "utf8"));
}

test("the unit preloads jemalloc by its library name (each architecture's loader finds its own) and the package depends on it", () => {
  const env = unitCommand().env;
  // A path would name one architecture's library: the arm64 loader (a Pi, or qemu in arm64.test.ts) would refuse an x86 one.
  assert.equal(env.LD_PRELOAD, "libjemalloc.so.2");
  const build = readFileSync(join(ROOT, "packaging/build-deb.sh"), "utf8");
  assert.match(/^Depends: (.*)$/m.exec(build)?.[1] ?? "", /(^|, )libjemalloc2(,|$)/, "the package pulls the library the unit preloads");
});

test(
  "a program that changes its user runs under the unit's malloc environment (jemalloc's background thread made setpriv abort)",
  { skip: process.getuid?.() !== 0 ? "needs root (setpriv --reuid)" : false },
  () => {
    const env = { PATH: process.env.PATH ?? "/usr/bin:/bin", ...unitCommand().env };
    const r = spawnSync(
      "setpriv",
      ["--reuid=nobody", "--regid=nogroup", "--init-groups", "--", process.execPath, "--jitless", "-e", "console.log(process.getuid())"],
      { env, encoding: "utf8" },
    );
    assert.equal(r.signal, null, `setpriv under the unit's environment: ${r.signal} ${r.stderr}`);
    assert.equal(r.status, 0, r.stderr);
    assert.notEqual(r.stdout.trim(), "0");
    assert.doesNotMatch(r.stderr, /cannot be preloaded|<jemalloc>/);
  },
);

test("the daemon runs under the unit's sandbox with the unit's node flags: check-config passes, devices are polled, /healthz answers, SIGTERM stops it cleanly", async () => {
  await withSite(tcpScenario(), (site) =>
    withTmpDir(async (tmp) => {
      const port = await freePort();
      const base = testConfigInput(join(tmp, "data"));
      const file = join(tmp, "config.yaml");
      writeFileSync(
        file,
        stringify({
          ...base,
          log_level: "warn",
          http: { ...base.http, listen: `127.0.0.1:${port}` },
          telemetry: { poll_interval_ms: 500, retention_max_mb: 64, commit_interval_s: 1 },
          devices: [tcpDevice("battery", site.tcpPorts[0], 1), tcpDevice("grid", site.tcpPorts[0], 3)],
        }),
      );
      const unit = unitCommand();

      // ExecStartPre's check-config, with its own flags.
      const pre = lines("sitegate.service").find((l) => l.startsWith("ExecStartPre=/opt/sitegate/current/node/bin/node"))!;
      const preFlags = pre
        .slice("ExecStartPre=/opt/sitegate/current/node/bin/node".length)
        .trim()
        .split(/\s+/)
        .filter((w) => w.startsWith("--") && !w.startsWith("--config"));
      const checked = await finished(
        sandboxed("sitegate.service", [process.execPath, ...preFlags, CLI, "check-config", "--config", file], unit.env),
      );
      assert.equal(checked.code, 0, checked.out);
      assert.match(checked.out, /config ok/);

      const child = sandboxed("sitegate.service", [process.execPath, ...unit.nodeArgs, CLI, "run", "--config", file], unit.env);
      const done = finished(child);
      const agent = new Agent({ connect: { ca: testCert().cert } });
      try {
        let health: any = null;
        await until(
          async () => {
            if (child.exitCode !== null) throw new Error(`the daemon exited under the sandbox: ${(await done).out}`);
            try {
              const res = await request(`https://127.0.0.1:${port}/healthz`, { dispatcher: agent });
              health = await res.body.json();
              return res.statusCode === 200 && health.devices?.online === 2;
            } catch {
              return false;
            }
          },
          "both devices polled under the sandbox",
          30_000,
        );
        assert.equal(health.status, "ok");
        // the unit's malloc, under the unit's syscall filter
        assert.ok(onJemalloc(child.pid!), "the daemon runs on jemalloc");
      } finally {
        if (child.exitCode === null) child.kill("SIGTERM");
        await agent.close();
      }
      const end = await done;
      assert.equal(end.code, 0, `exit after SIGTERM: ${end.code} ${end.signal}\n${end.out}`);
      assert.doesNotMatch(end.out, /EPERM|Operation not permitted|"level":(50|60)/, "nothing refused by the filters");
      assert.doesNotMatch(
        end.out,
        /cannot be preloaded|<jemalloc>/,
        "the loader and jemalloc took the unit's environment without a complaint",
      );
    }),
  );
});

test("the update gate runs under its unit's sandbox (no network, no devices, W^X)", async () => {
  await withTmpDir(async (tmp) => {
    const exec = lines("sitegate-update-check.service").find((l) => l.startsWith("ExecStart="))!;
    const words = exec.slice("ExecStart=".length).trim().split(/\s+/);
    const script = words.findIndex((w) => w.endsWith("/cli.js"));
    const r = await finished(
      sandboxed("sitegate-update-check.service", [
        process.execPath,
        ...words.slice(1, script),
        CLI,
        ...words.slice(script + 1),
        "--root",
        tmp,
      ]),
    );
    assert.equal(r.code, 0, r.out);
  });
});

test("the fleet's update request is carried out under its unit's sandbox: no SETUID/SETGID (the data dir child through systemd-run), umask 0077 yet a readable release", async (t) => {
  if (process.getuid?.() !== 0) return t.skip("needs root (the unit's user; a data dir of another owner)");
  await withInstalled(async (env, dir) => {
    const good = await fakeBundle({ version: "0.2.0", mode: "healthy", key: env.keys.privateKey, out: join(dir, "v020.bundle") });
    const cert = testCert();
    const server = createServer({ cert: cert.cert, key: cert.key }, (_req, res) => res.end(readFileSync(good)));
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const base = `https://127.0.0.1:${(server.address() as AddressInfo).port}/u/`;
    try {
      // The service manager would start the child as the data dir's owner, outside this
      // sandbox; the stand-in records how it was asked and runs it here (hence --jitless).
      const bin = join(dir, "bin");
      mkdirSync(bin);
      const calls = join(dir, "systemd-run.calls");
      writeFileSync(
        join(bin, "systemd-run"),
        `#!/bin/sh\necho "$@" >> '${calls}'\nwhile [ "$1" != "--" ]; do shift; done\nshift\nnode="$1"; shift\nexec "$node" --jitless "$@"\n`,
        { mode: 0o755 },
      );
      const config = requestConfig(env, dir, { allowed_urls: [base], allow_unsigned_requests: true });
      mkdirSync(join(env.dataDir, "update"), { recursive: true });
      writeFileSync(
        join(env.dataDir, "update", "request.json"),
        JSON.stringify({
          url: `${base}0.2.0.bundle`,
          sha256: createHash("sha256").update(readFileSync(good)).digest("hex"),
          version: "0.2.0",
        }),
      );
      assert.equal(spawnSync("chown", ["-R", "65534:65534", env.dataDir]).status, 0);
      spawnSync("chmod", ["0750", env.dataDir]);

      const exec = lines("sitegate-update-request.service").find((l) => l.startsWith("ExecStart="))!;
      const words = exec.slice("ExecStart=".length).trim().split(/\s+/);
      const script = words.findIndex((w) => w.endsWith("/cli.js"));
      assert.deepEqual(words.slice(script + 1, script + 3), ["update", "apply-request"]);
      const child = spawn(
        "unshare",
        [
          ...["--mount", "--propagation", "private", "python3", SANDBOX, join(ROOT, "systemd", "sitegate-update-request.service"), "--"],
          ...[process.execPath, ...words.slice(1, script), CLI, "update", "apply-request", "--config", config],
        ],
        {
          stdio: ["ignore", "pipe", "pipe"],
          env: {
            ...updateCliEnv(env, ""),
            PATH: `${bin}:${process.env.PATH}`,
            NODE_EXTRA_CA_CERTS: cert.certFile,
          },
        },
      );
      const r = await finished(child);
      assert.equal(r.code, 0, r.out);
      assert.match(readFileSync(calls, "utf8"), /--uid=65534 --gid=65534 --property=NoNewPrivileges=yes -- /);
      assert.equal(readlinkSync(join(env.root, "current")), "releases/0.2.0");
      for (const p of ["releases/0.2.0", "releases/0.2.0/dist", "releases/0.2.0/dist/src"])
        assert.equal(statSync(join(env.root, p)).mode & 0o777, 0o755, `${p}: the daemon's user reads the release`);
      assert.equal(statSync(join(env.root, "releases/0.2.0/manifest.json")).mode & 0o777, 0o644);
      assert.equal(existsSync(join(env.dataDir, "update", "request.json")), false);
    } finally {
      server.close();
    }
  });
});
