// `sitegate dump --config FILE DEVICE_ID` while the daemon runs and holds the serial port
// (a Sungrow on an RTU bus over a socat pty, 9600 baud, line timing on): the capture comes
// through the daemon's control socket and its own bus queue, the daemon keeps polling the
// device meanwhile and after, and the socket is the daemon user's alone (mode 0600). With the
// daemon stopped the same command opens the port itself.
import { test } from "node:test";
import assert from "node:assert/strict";
import { statSync } from "node:fs";
import { join } from "node:path";
import { Agent, request } from "undici";
import { withSite, type ScenarioInput } from "../support/site.js";
import { withTmpDir } from "../support/tmp.js";
import { spawnDaemon } from "../support/daemon-process.js";
import { rtuDevice } from "../support/gateway.js";
import { TEST_API_KEY } from "../support/config.js";
import { testCert } from "../support/tls.js";
import { until } from "../support/wait.js";
import { runCli } from "../support/cli.js";
import { MASK_WORD, type Capture } from "../../src/modbus/device/capture.js";
import { CONTROL_SOCKET } from "../../src/control-socket.js";

function rtuSite(): ScenarioInput {
  return {
    seed: 7,
    control: { listen: "127.0.0.1:0" },
    site: { base_load_w: 3000, load_noise_pct: 0, pv_irradiance: 0 },
    ports: [
      {
        kind: "rtu",
        path: "ttySIM",
        peer: "ttyGW",
        baud: 9600,
        line_timing: true,
        turnaround_ms: 5,
        devices: [
          {
            unit: 1,
            model: "sungrow-sh",
            name: "sungrow",
            rated_power_w: 10000,
            max_power_w: 5000,
            capacity_wh: 9600,
            soc_pct: 60,
            pv_max_w: 0,
            power_limits: false,
          },
        ],
      },
    ],
  } as ScenarioInput;
}

async function deviceCount(url: string): Promise<number> {
  const agent = new Agent({ connect: { ca: testCert().cert } });
  try {
    const r = await request(url + "/v1/api/gateway/site-001/devicesync", { headers: { "x-api-key": TEST_API_KEY }, dispatcher: agent });
    const json = (await r.body.json()) as { devices?: unknown[] };
    return json.devices?.length ?? 0;
  } finally {
    await agent.close();
  }
}

test("dump --config goes through the running daemon, which holds the RTU port and keeps polling", async () => {
  await withSite(rtuSite(), async (site) => {
    await withTmpDir(async (dir) => {
      const d = await spawnDaemon(dir, {
        rtu_ports: { "1": site.rtuPeers[0] },
        telemetry: { poll_interval_ms: 500, retention_max_mb: 64, commit_interval_s: 10 },
        devices: [rtuDevice("sungrow", 1, "sungrow-sh", { mb_device_type: 3 })] as never,
      });
      try {
        await until(async () => (await deviceCount(d.url)) === 1, "the Sungrow paired", 60_000);
        const sock = join(dir, "data", CONTROL_SOCKET);
        assert.equal(statSync(sock).mode & 0o777, 0o600, "the control socket is the daemon user's alone");

        const requests = () => (site.state().devices.sungrow as { requests: number }).requests;
        const out = await runCli("dump", "--config", d.configFile, "sungrow");
        assert.equal(out.code, 0, out.stderr);
        assert.match(out.stderr, /through the running daemon/);
        const cap = JSON.parse(out.stdout) as Capture & { via?: string; device_id?: string };
        assert.equal(cap.via, "daemon");
        assert.equal(cap.device_id, "sungrow");
        assert.equal(cap.profile, "sungrow-sh");
        assert.ok(cap.ranges.filter((r) => r.words).length >= cap.ranges.length / 2, `${JSON.stringify(cap.ranges.slice(0, 5))}`);
        // the field fault is in the capture: this firmware lacks the limits
        assert.equal(cap.ranges.find((r) => r.address === 33046)?.exception, 2);
        assert.ok(
          cap.ranges.some((r) => r.masked && r.words?.every((w) => w === MASK_WORD)),
          "the serial masked",
        );
        assert.ok(
          d.lines.some((l) => l.msg === "dump served" && l.device_id === "sungrow"),
          "the daemon served the dump",
        );
        assert.ok(!d.lines.some((l) => /lock|EBUSY/i.test(String(l.err ?? l.msg))), "no second open of the port");

        // Opening the port beside the daemon is what the socket spares: the port is locked.
        const fight = await runCli("dump", "--endpoint", `rtu:${site.rtuPeers[0]}?baud=9600`, "--unit", "1", "--profile", "sungrow-sh");
        assert.equal(fight.code, 1, fight.stderr);
        assert.match(fight.stderr, /the port is in use/);
        const after = requests();
        await until(() => requests() > after + 5, "the daemon keeps polling after the dump", 30_000);
        assert.ok(d.alive());

        // Not a device of the config: said, exit 2, nothing asked of the daemon.
        const unknown = await runCli("dump", "--config", d.configFile, "nope");
        assert.equal(unknown.code, 2);
        assert.match(unknown.stderr, /no device "nope"/);
      } finally {
        await d.stop();
      }
      // The daemon stopped: the command opens the port itself.
      const alone = await runCli("dump", "--config", d.configFile, "sungrow");
      assert.equal(alone.code, 0, alone.stderr);
      assert.doesNotMatch(alone.stderr, /through the running daemon/);
      assert.equal((JSON.parse(alone.stdout) as { via?: string }).via, undefined);
    });
  });
});
