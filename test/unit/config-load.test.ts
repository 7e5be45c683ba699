import { test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { loadConfig, parseConfig } from "../../src/load-config.js";
import { testConfigInput, TEST_ORG } from "../support/config.js";
import { withTmpDir } from "../support/tmp.js";
import { problems } from "../support/issues.js";

function has(list: Array<{ path: string; message: string }>, path: string, re: RegExp): void {
  const hit = list.find((d) => d.path === path && re.test(d.message));
  assert.ok(hit, `no problem at ${path} matching ${re}; got ${JSON.stringify(list)}`);
}

test("a valid config loads with defaults filled and paths resolved against its folder", () => {
  const input = testConfigInput("./state");
  delete (input as Record<string, unknown>).telemetry;
  delete (input as Record<string, unknown>).api_version;
  const cfg = parseConfig(input, "/etc/sitegate");
  assert.equal(cfg.data_dir, "/etc/sitegate/state");
  assert.equal(cfg.api_version, "v1");
  assert.deepEqual(cfg.telemetry, { poll_interval_ms: 1000, retention_max_mb: 512, commit_interval_s: 60 });
  assert.equal(cfg.auth.token_ttl_s, 3600);
});

test("data_dir: /var/lib/sitegate when absent, wherever the config file is; a relative one resolves against the file's folder", () => {
  const input = testConfigInput("unused") as Record<string, unknown>;
  delete input.data_dir;
  assert.equal(parseConfig(input, "/etc/sitegate").data_dir, "/var/lib/sitegate");
  assert.equal(parseConfig({ ...input, data_dir: "./var" }, "/etc/sitegate").data_dir, "/etc/sitegate/var");
});

test("a missing key is reported as required, with its full path", () => {
  const input = testConfigInput("/tmp/x");
  delete (input.auth.users![0] as Record<string, unknown>).password_hash;
  delete (input as Record<string, unknown>).site_id;
  const list = problems(() => parseConfig(input, "/"));
  has(list, "auth.users[0].password_hash", /^required$/);
  has(list, "site_id", /^required$/);
});

test("every problem is reported at once", () => {
  const input = testConfigInput("/tmp/x") as Record<string, unknown>;
  input.site_id = 42;
  input.bogus = true;
  (input.telemetry as Record<string, unknown>).poll_interval_ms = "fast";
  const list = problems(() => parseConfig(input, "/"));
  has(list, "site_id", /expected a string, found 42/);
  has(list, "bogus", /unknown key/);
  has(list, "telemetry.poll_interval_ms", /expected a number, found "fast"/);
  assert.equal(list.length, 3);
});

test("an unknown nested key is an error", () => {
  const input = testConfigInput("/tmp/x");
  (input.http as Record<string, unknown>).port = 8443;
  has(
    problems(() => parseConfig(input, "/")),
    "http.port",
    /unknown key/,
  );
});

test("callback URLs must be https://", () => {
  const input = testConfigInput("/tmp/x");
  input.partner.execution_url = "http://partner.example/exec";
  input.partner.data_push_url = "ftp://partner.example";
  const list = problems(() => parseConfig(input, "/"));
  has(list, "partner.execution_url", /https:\/\//);
  has(list, "partner.data_push_url", /https:\/\//);
});

test("a password hash that is not an scrypt hash is refused", () => {
  const input = testConfigInput("/tmp/x");
  input.auth.users![0].password_hash = "hunter2";
  has(
    problems(() => parseConfig(input, "/")),
    "auth.users[0].password_hash",
    /scrypt/,
  );
});

test("a bad CIDR in the allowlist and a bad organization id are refused", () => {
  const input = testConfigInput("/tmp/x");
  input.auth.ip_allowlist = ["127.0.0.1/32", "10.0.0.300/8"];
  input.organization_id = "not-a-uuid";
  const list = problems(() => parseConfig(input, "/"));
  has(list, "auth.ip_allowlist[1]", /CIDR/);
  has(list, "organization_id", /UUID/i);
});

test("a device on an RTU port that is not configured is refused", () => {
  const input = testConfigInput("/tmp/x", {
    rtu_ports: { "1": "/dev/ttyUSB0" },
    devices: [
      {
        device_id: "m1",
        device_type: "modbus",
        device_integration: "org/sdm630",
        mb_type: 1,
        mb_device_type: 1,
        mb_slave_id: 10,
        mb_baud: 9600,
        mb_rtu_no: 2,
      },
    ],
  });
  has(
    problems(() => parseConfig(input, "/")),
    "devices[0].mb_rtu_no",
    /not in rtu_ports/,
  );
});

test("a missing file and invalid YAML are reported as config errors", async () => {
  await withTmpDir((dir) => {
    has(
      problems(() => loadConfig(join(dir, "nope.yaml"))),
      "(file)",
      /ENOENT/,
    );
    const bad = join(dir, "bad.yaml");
    writeFileSync(bad, "site_id: [unclosed\n");
    has(
      problems(() => loadConfig(bad)),
      "(yaml)",
      /.+/,
    );
  });
});

test("JSON is accepted as YAML", async () => {
  await withTmpDir((dir) => {
    const file = join(dir, "c.json");
    writeFileSync(file, JSON.stringify(testConfigInput("./data")));
    const cfg = loadConfig(file);
    assert.equal(cfg.site_id, "site-001");
    assert.equal(cfg.data_dir, join(dir, "data"));
  });
});

test("an unknown integration in devices and an unreadable TLS file are config errors", () => {
  const input = testConfigInput("/tmp/x", {
    devices: [
      {
        device_id: "d",
        device_type: "modbus",
        device_integration: "org/warp-drive",
        mb_type: 2,
        mb_device_type: 99,
        mb_ip: "127.0.0.1",
        mb_port: 502,
      },
    ],
  });
  has(
    problems(() => parseConfig(input, "/")),
    "devices[0].device_integration",
    /unknown integration "warp-drive"/,
  );
  const noCert = testConfigInput("/tmp/x");
  noCert.http.tls.cert = "/nonexistent/cert.pem";
  has(
    problems(() => parseConfig(noCert, "/")),
    "http.tls.cert",
    /cannot read \/nonexistent\/cert.pem/,
  );
});

test("a device of another organization in devices is refused, as the configure endpoint does", () => {
  const input = testConfigInput("/tmp/x", {
    devices: [
      {
        device_id: "ok",
        device_type: "modbus",
        device_integration: `${TEST_ORG}/sunspec`,
        mb_type: 2,
        mb_device_type: 99,
        mb_ip: "127.0.0.1",
        mb_port: 502,
      },
      {
        device_id: "alien",
        device_type: "modbus",
        device_integration: "0b0b0b0b-1111-4222-8333-444455556666/sunspec",
        mb_type: 2,
        mb_device_type: 99,
        mb_ip: "127.0.0.1",
        mb_port: 502,
      },
    ],
  });
  const list = problems(() => parseConfig(input, "/"));
  has(list, "devices[1].device_integration", /organization "0b0b0b0b-1111-4222-8333-444455556666" is not this gateway's/);
  assert.equal(list.length, 1, JSON.stringify(list));
});

test("an RTU port's framing is checked by path, and devices of one port must agree on its baud", () => {
  const bad = testConfigInput("/tmp/x", {
    rtu_ports: {
      "1": { path: "/dev/ttyS0", parity: "mark" as never, stop_bits: 3 as never },
      "2": 42 as never,
      "3": { baud: 9600 } as never,
    },
  });
  const list = problems(() => parseConfig(bad, "/"));
  has(list, "rtu_ports.1.parity", /none|even|odd/);
  has(list, "rtu_ports.1.stop_bits", /1 or 2/);
  has(list, "rtu_ports.2", /serial device path or \{ path, baud, parity, stop_bits \}/);
  has(list, "rtu_ports.3.path", /^required$/);
  const rtu = { device_type: "modbus", device_integration: `${TEST_ORG}/sdm630`, mb_type: 1, mb_device_type: 1, mb_rtu_no: 1 } as const;
  const input = testConfigInput("/tmp/x", {
    rtu_ports: { "1": "/dev/ttyUSB0" },
    devices: [
      { ...rtu, device_id: "a", mb_slave_id: 10, mb_baud: 9600 },
      { ...rtu, device_id: "b", mb_slave_id: 11, mb_baud: 19200 },
    ],
  });
  has(
    problems(() => parseConfig(input, "/")),
    "devices[1].mb_baud",
    /19200 differs from 9600 of devices\[0\] on the same RTU port/,
  );
});

test("zigbee and gpio blocks load with their defaults", () => {
  const input = testConfigInput("/tmp/x", {
    zigbee: {
      url: "mqtt://127.0.0.1:1883",
      devices: [
        { device_id: "plug-1", friendly_name: "washer-plug", device_type: 30, rated_power_w: 2000, shed_priority: 1 },
        { device_id: "trv-1", ieee_address: "0x00158D0001A2B3C4", device_type: 31 },
      ],
    },
    gpio: {
      backend: "chardev",
      chip: "pinctrl-bcm2711",
      lines: [
        { device_id: "boiler", line: 27, device_type: 41, rated_power_w: 3000 },
        {
          device_id: "rse-60",
          line: 17,
          device_type: 40,
          active_low: true,
          debounce_ms: 50,
          on_active: { event_type: "pv_limit", limit_pct: 60 },
        },
      ],
    },
  });
  const cfg = parseConfig(input, "/");
  assert.equal(cfg.zigbee!.base_topic, "zigbee2mqtt");
  assert.equal(cfg.zigbee!.command_timeout_ms, 5000);
  assert.equal(cfg.zigbee!.devices[1].setback_c, 2, "a thermostat's setback defaults to 2 °C");
  assert.equal(cfg.zigbee!.devices[1].ieee_address, "0x00158d0001a2b3c4");
  assert.equal(cfg.zigbee!.devices[0].setback_c, undefined);
  const out = cfg.gpio!.lines[0];
  assert.equal(out.device_type === 41 && out.active_low, false);
  const inp = cfg.gpio!.lines[1];
  assert.ok(inp.device_type === 40 && inp.on_active?.limit_pct === 60);
});

test("bad zigbee and gpio entries are reported by path", () => {
  const input = testConfigInput("/tmp/x", {
    devices: [],
    zigbee: {
      url: "http://127.0.0.1:1883",
      devices: [
        { device_id: "a", device_type: 30 },
        { device_id: "b", friendly_name: "p", ieee_address: "0x00158d0001a2b3c4", device_type: 30 },
        { device_id: "c", friendly_name: "q", device_type: 30, setback_c: 2 },
        { device_id: "d", friendly_name: "r", device_type: 12 as 30 },
      ],
    },
    gpio: {
      backend: "sim",
      chip: "gpiochip0",
      lines: [
        { device_id: "e", line: 27, device_type: 41 },
        { device_id: "f", line: 27, device_type: 40, on_active: { event_type: "pv_limit", limit_pct: 160 } },
      ],
    },
  });
  const list = problems(() => parseConfig(input, "/"));
  has(list, "zigbee.url", /mqtt:\/\//);
  has(list, "zigbee.devices[0].friendly_name", /exactly one of friendly_name and ieee_address/);
  has(list, "zigbee.devices[1].friendly_name", /exactly one/);
  has(list, "zigbee.devices[2].setback_c", /only a thermostat/);
  has(list, "zigbee.devices[3].device_type", /30 .* or 31/);
  has(list, "gpio.chip", /control URL/);
  has(list, "gpio.lines[1].on_active.limit_pct", /0\.\.100/);
});

test("a device_id may name one device only, across devices, zigbee and gpio", () => {
  const input = testConfigInput("/tmp/x", {
    zigbee: { url: "mqtt://127.0.0.1:1883", devices: [{ device_id: "boiler", friendly_name: "p", device_type: 30 }] },
    gpio: { backend: "sim", chip: "http://127.0.0.1:1", lines: [{ device_id: "boiler", line: 27, device_type: 41 }] },
  });
  has(
    problems(() => parseConfig(input, "/")),
    "gpio.lines[0].device_id",
    /duplicate device_id "boiler"/,
  );
});

test("a device's kind (mb_type) missing is required, a wrong one names the kinds there are and what was found", () => {
  const device = { device_id: "d", device_type: "modbus", device_integration: `${TEST_ORG}/sdm630`, mb_device_type: 99 };
  const input = testConfigInput("/tmp/x", {
    devices: [device, { ...device, device_id: "e", mb_type: 3 }] as never,
  });
  const list = problems(() => parseConfig(input, "/"));
  has(list, "devices[0].mb_type", /^required \(expected one of 1, 2\)$/);
  has(list, "devices[1].mb_type", /^expected one of 1, 2, found 3$/);
});
