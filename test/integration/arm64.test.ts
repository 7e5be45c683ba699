// The arm64 packages on this x86 machine (`make test-arm`, which installs qemu-user-static and
// the arm64 cross tools). It builds the arm64 .debs (the gateway's and sitegate-sim),
// checks with `file` that its node and better_sqlite3.node are aarch64, then runs the
// release's gateway under qemu-aarch64-static with the arm64 runtime (the unit's node flags)
// against the simulator running natively: the gateway pairs a meter over an RS-485 pty
// (serialport's arm64 addon) and a battery over TCP, stores readings (better-sqlite3's arm64
// addon) and pushes them to a partner sink.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { stringify } from "yaml";
import { startSim } from "../../hw-sim/sim.js";
import { startSink } from "../support/uplink-harness.js";
import { testConfigInput } from "../support/config.js";
import { rtuDevice, tcpDevice } from "../support/gateway.js";
import { freePort } from "../support/net.js";
import { unitCommand } from "../support/site50.js";
import { until } from "../support/wait.js";
import { partnerTo } from "../support/partner-sink.js";

const ROOT = resolve(fileURLToPath(import.meta.url), "../../../..");
const VERSION = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string }).version;
const have = (cmd: string) => spawnSync("sh", ["-c", `command -v ${cmd}`]).status === 0;
const why = !have("qemu-aarch64-static")
  ? "needs qemu-user-static (make test-arm installs it)"
  : !have("aarch64-linux-gnu-g++")
    ? "needs g++-aarch64-linux-gnu (make test-arm installs it)"
    : false;

test(
  "the arm64 .deb carries aarch64 node and addons; its gateway under qemu pairs devices and pushes to a sink",
  { skip: why, timeout: 900_000 },
  async (t) => {
    const built = spawnSync("make", ["--no-print-directory", "deb", "DEB_ARCHS=arm64", "NO_BUILD=1", "DEV_UPDATE_KEY=1"], {
      cwd: ROOT,
      encoding: "utf8",
    });
    assert.equal(built.status, 0, `make deb: ${built.stderr.slice(-3000)}`);
    const dir = mkdtempSync(join(tmpdir(), "sitegate-arm64-"));
    // removed by the last hook, after the gateway has stopped (removing it first raced the
    // running gateway's writes: ENOTEMPTY, and a gateway left running with its files gone)
    let started = false;
    t.after(() => {
      if (!started) rmSync(dir, { recursive: true, force: true });
    });
    const deb = join(ROOT, "var", "pkg", `sitegate_${VERSION}_arm64.deb`);
    const x = spawnSync("dpkg-deb", ["-x", deb, join(dir, "pkg")], { encoding: "utf8" });
    assert.equal(x.status, 0, x.stderr);
    const rel = join(dir, "pkg", "usr", "lib", "sitegate", "release");
    const node = join(rel, "node", "bin", "node");
    const addon = join(rel, "node_modules", "better-sqlite3", "build", "Release", "better_sqlite3.node");
    for (const f of [node, addon]) {
      const file = spawnSync("file", ["-b", f], { encoding: "utf8" }).stdout;
      assert.match(file, /ELF 64-bit .*ARM aarch64/, `${f}: ${file}`);
    }
    const manifest = JSON.parse(readFileSync(join(rel, "manifest.json"), "utf8")) as Record<string, unknown>;
    assert.equal(manifest.arch, "arm64");
    assert.equal(manifest.runtime, true);
    assert.equal(manifest.node_version, "24.21.0");
    assert.equal(manifest.node_abi, "137");
    // the simulator's own arm64 package: on the gateway's runtime and modules, nothing native of its own
    const simDeb = join(ROOT, "var", "pkg", `sitegate-sim_${VERSION}_arm64.deb`);
    const field = (f: string) => spawnSync("dpkg-deb", ["-f", simDeb, f], { encoding: "utf8" }).stdout.trim();
    assert.deepEqual([field("Architecture"), field("Depends").split(",")[0]], ["arm64", `sitegate (= ${VERSION})`]);
    const simFiles = spawnSync("dpkg-deb", ["-c", simDeb], { encoding: "utf8" }).stdout;
    assert.match(simFiles, /\.\/usr\/lib\/sitegate-sim\/dist\/hw-sim\/cli\.js\n/);
    assert.doesNotMatch(simFiles, /\.node\n|\/node\/bin\/node/, "no addon or runtime of its own");
    assert.doesNotMatch(
      spawnSync("dpkg-deb", ["-c", deb], { encoding: "utf8" }).stdout,
      /hw-sim|sitegate-sim/,
      "no simulator in the gateway's package",
    );

    // the simulator natively, the gateway emulated
    const sim = await startSim({
      seed: 5,
      control: { listen: "127.0.0.1:0" },
      ports: [
        { kind: "tcp", listen: "127.0.0.1:0", devices: [{ unit: 1, model: "sunspec-storage", name: "battery" }] },
        {
          kind: "rtu",
          path: join(dir, "ttySIM"),
          peer: join(dir, "ttyGW"),
          baud: 9600,
          devices: [{ unit: 10, model: "sdm630", name: "meter" }],
        },
      ],
    });
    const sink = await startSink();
    const port = await freePort();
    const base = testConfigInput(join(dir, "data"));
    const config = {
      ...base,
      log_level: "warn",
      http: { ...base.http, listen: `127.0.0.1:${port}` },
      partner: partnerTo(sink, { headers: [] }),
      rtu_ports: { "1": sim.rtuPeers[0] },
      devices: [tcpDevice("battery", sim.tcpPorts[0], 1), rtuDevice("meter", 10, "sdm630")],
    };
    writeFileSync(join(dir, "config.yaml"), stringify(config));
    // The unit's environment preloads jemalloc by its library name (no path): the aarch64 loader
    // searches only its own directories, so nothing x86 reaches it; without an arm64 libjemalloc2
    // it says "cannot be preloaded ... ignored" and node runs on glibc (docs/sizing.md).
    const unit = unitCommand();
    let out = "";
    const gw = spawn(
      "qemu-aarch64-static",
      [
        "-L",
        "/usr/aarch64-linux-gnu",
        node,
        ...unit.nodeArgs,
        join(rel, "dist", "src", "cli.js"),
        "run",
        "--config",
        join(dir, "config.yaml"),
      ],
      {
        env: { ...process.env, ...unit.env, LOG_FORMAT: "json" },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    started = true;
    gw.stdout.on("data", (d) => (out = (out + d).slice(-4000)));
    gw.stderr.on("data", (d) => (out = (out + d).slice(-4000)));
    t.after(async () => {
      if (gw.exitCode === null && gw.signalCode === null) {
        const exited = new Promise((r) => gw.once("exit", r));
        gw.kill("SIGTERM");
        // an emulated stop can be slow on a loaded machine; a gateway that has not stopped in
        // 60 s is killed, so the folder below is never removed under a running gateway
        const timer = setTimeout(() => gw.kill("SIGKILL"), 60_000);
        await exited;
        clearTimeout(timer);
      }
      await sink.stop();
      await sim.stop();
      rmSync(dir, { recursive: true, force: true });
    });
    const version = spawnSync(
      "qemu-aarch64-static",
      ["-L", "/usr/aarch64-linux-gnu", node, join(rel, "dist", "src", "cli.js"), "--version"],
      { encoding: "utf8" },
    );
    assert.match(version.stdout, /node 24\.21\.0 \(abi 137\) linux-arm64/, version.stderr);
    const pushed = (id: string) => sink.pushed(id);
    await until(
      () => gw.exitCode !== null || (pushed("meter") && pushed("battery")),
      "readings of the RTU meter and the TCP battery at the sink",
      300_000,
    );
    assert.equal(gw.exitCode, null, `the emulated gateway exited (${gw.exitCode}): ${out}`);
  },
);
