// The one loopback rule of the fleet and zigbee broker URLs: the host is parsed (an IPv4
// literal in 127.0.0.0/8, ::1, localhost), never matched by prefix; a URL that MQTT.js
// would read differently from the check is refused; and the config applies the rule to
// both blocks with a path-specific error.
import { test } from "node:test";
import assert from "node:assert/strict";
import { brokerEndpoint, brokerUrlProblem, isLoopbackHost } from "../../src/util/loopback.js";
import { parseConfig } from "../../src/load-config.js";
import { testConfigInput } from "../support/config.js";
import { problems } from "../support/issues.js";
import { testCert } from "../support/tls.js";
import { basename, dirname } from "node:path";

test("isLoopbackHost: 127.0.0.0/8, ::1 in any spelling, localhost; nothing that only starts like one", () => {
  for (const h of ["127.0.0.1", "127.255.255.254", "127.0.0.53", "::1", "[::1]", "0:0:0:0:0:0:0:1", "0::1", "localhost", "LocalHost"])
    assert.equal(isLoopbackHost(h), true, h);
  for (const h of [
    "127.evil.example",
    "127.0.0.1.evil.example",
    "127.1",
    "0x7f.0.0.1",
    "2130706433",
    "128.0.0.1",
    "10.0.0.1",
    "::",
    "::2",
    "1::1",
    "::ffff:127.0.0.1",
    "fe80::1%lo",
    "localhost.evil.example",
    "evil-localhost",
    "",
  ])
    assert.equal(isLoopbackHost(h), false, h);
});

test("broker URLs: mqtts anywhere, mqtt only to loopback, nothing MQTT.js could parse another way", () => {
  for (const u of [
    "mqtts://broker.example:8883",
    "mqtts://broker.example",
    "mqtt://127.0.0.1:1883",
    "mqtt://[::1]:1883",
    "mqtt://localhost",
  ])
    assert.equal(brokerUrlProblem(u), undefined, u);
  assert.match(brokerUrlProblem("mqtt://127.evil.example:1883")!, /loopback.*not 127\.evil\.example/);
  assert.match(brokerUrlProblem("mqtt://broker.example:1883")!, /mqtts:\/\//);
  // WHATWG reads 127.0.0.1 here and MQTT.js's url.parse evil.example.
  assert.match(brokerUrlProblem("mqtt://evil.example\\@127.0.0.1:1883")!, /no user info/);
  assert.match(brokerUrlProblem("mqtt://user:pw@127.0.0.1:1883")!, /no user info/);
  assert.match(brokerUrlProblem("mqtt://127.0.0.1:1883/path")!, /no path/);
  assert.match(brokerUrlProblem("mqtt://127.0.0.1:1883?clientId=x")!, /no path, query/);
  assert.match(brokerUrlProblem("mqtt://127.0.0.1\t.evil:1883")!, /spaces/);
  assert.match(brokerUrlProblem("https://127.0.0.1")!, /mqtts:\/\/ or mqtt:\/\//);
  assert.match(brokerUrlProblem("mqtt://127.0.0.1:0")!, /port/);
  assert.match(brokerUrlProblem("not a url")!, /spaces|URL/);
  assert.deepEqual(brokerEndpoint("mqtt://[::1]:1884"), { protocol: "mqtt", host: "::1", port: 1884 });
  assert.deepEqual(brokerEndpoint("mqtts://b.example"), { protocol: "mqtts", host: "b.example", port: 8883 });
  assert.deepEqual(brokerEndpoint("mqtt://127.0.0.1"), { protocol: "mqtt", host: "127.0.0.1", port: 1883 });
});

test("the config applies the rule to fleet.url and zigbee.url alike; zigbee takes ca_file with mqtts only", () => {
  const base = testConfigInput("/tmp/x");
  const fleet = (url: string) => problems(() => parseConfig({ ...base, fleet: { url, username: "u", password: "p" } }, "/"));
  const zigbee = (over: Record<string, unknown>) =>
    problems(() => parseConfig({ ...base, zigbee: { devices: [], ...over } } as never, "/"));
  const f = fleet("mqtt://127.evil.example:1883");
  assert.equal(f[0].path, "fleet.url");
  assert.match(f[0].message, /loopback/);
  const z = zigbee({ url: "mqtt://127.evil.example:1883" });
  assert.equal(z[0].path, "zigbee.url");
  assert.match(z[0].message, /loopback/);
  assert.equal(zigbee({ url: "mqtt://zigbee.lan:1883" })[0].path, "zigbee.url");
  assert.equal(zigbee({ url: "mqtt://127.0.0.1:1883", ca_file: "/etc/ssl/certs/ca-certificates.crt" })[0].path, "zigbee.ca_file");
  assert.equal(zigbee({ url: "mqtts://zigbee.lan:8883", ca_file: "/nonexistent/ca.pem" })[0].path, "zigbee.ca_file");
  const cert = testCert().certFile;
  const ok = parseConfig(
    { ...base, zigbee: { url: "mqtts://zigbee.lan:8883", ca_file: basename(cert), devices: [] } } as never,
    dirname(cert),
  );
  assert.equal(ok.zigbee?.ca_file, cert, "relative to the config's folder");
});
