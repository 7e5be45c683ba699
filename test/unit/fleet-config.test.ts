// The optional `fleet` block: mqtts:// (mqtt:// only to loopback), a client certificate
// or username + password, files resolved against the config's folder; without it the
// daemon has no fleet part at all. And the sample store keeps rows until the fleet
// cursor has them too.
import { test } from "node:test";
import assert from "node:assert/strict";
import { dirname, join } from "node:path";
import { parseConfig } from "../../src/load-config.js";
import { buildDaemon } from "../../src/daemon.js";
import { silentLogger } from "../../src/log.js";
import { StoragePart } from "../../src/storage/part.js";
import { SAMPLE_MIGRATIONS, SampleStore } from "../../src/telemetry/sample-store.js";
import { FLEET_MIGRATIONS } from "../../src/fleet/migrations.js";
import { telemetryConsumer } from "../../src/fleet/telemetry-cursor.js";
import { testConfig, testConfigInput } from "../support/config.js";
import { testCert } from "../support/tls.js";
import { snapshot } from "../support/uplink-harness.js";
import { withTmpDir } from "../support/tmp.js";
import { problems as configProblems } from "../support/issues.js";

const problems = (fleet: unknown) => configProblems(() => parseConfig({ ...testConfigInput("/tmp/x"), fleet }, "/"));

test("fleet: mqtts:// anywhere, mqtt:// only to loopback; certificate or username + password", () => {
  const ca = testCert().certFile;
  const ok = parseConfig(
    { ...testConfigInput("/tmp/x"), fleet: { url: "mqtts://broker.example:8883", ca_file: ca, username: "site-001", password: "p" } },
    "/",
  );
  assert.equal(ok.fleet?.topic_prefix, "sitegate");
  assert.equal(ok.fleet?.keepalive_s, 60);
  parseConfig({ ...testConfigInput("/tmp/x"), fleet: { url: "mqtt://127.0.0.1:1883", username: "u", password: "p" } }, "/");
  parseConfig({ ...testConfigInput("/tmp/x"), fleet: { url: "mqtts://b:8883", cert_file: ca, key_file: testCert().keyFile } }, "/");
  assert.match(problems({ url: "mqtt://broker.example:1883", username: "u", password: "p" })[0].message, /mqtts:\/\//);
  assert.match(problems({ url: "https://broker.example", username: "u" })[0].path, /^fleet\.url$/);
  assert.equal(problems({ url: "mqtts://b:8883", cert_file: ca })[0].path, "fleet.key_file");
  assert.equal(problems({ url: "mqtts://b:8883" })[0].path, "fleet.username");
  assert.equal(problems({ url: "mqtts://b:8883", username: "u", topic_prefix: "a/#" })[0].path, "fleet.topic_prefix");
  assert.equal(problems({ url: "mqtts://b:8883", username: "u", qos: 2 })[0].path, "fleet.qos");
  assert.equal(problems({ url: "mqtts://b:8883", username: "u", ca_file: "/nonexistent/ca.pem" })[0].path, "fleet.ca_file");
});

test("fleet: relative files resolve against the config folder; no fleet block, no fleet part", () => {
  const cfg = parseConfig(
    { ...testConfigInput("/tmp/x"), fleet: { url: "mqtts://b:8883", username: "u", ca_file: "cert.pem" } },
    dirname(testCert().certFile),
  );
  assert.equal(cfg.fleet?.ca_file, testCert().certFile);
  const without = buildDaemon(testConfig("/tmp/sitegate-no-fleet"), silentLogger());
  assert.equal(without.parts.has("fleet"), false);
  const withFleet = buildDaemon(testConfig("/tmp/sitegate-fleet", { fleet: { url: "mqtt://127.0.0.1:1", username: "u" } }), silentLogger());
  assert.equal(withFleet.parts.has("fleet"), true);
});

test("the sample store deletes only what its consumers (the HTTPS push, the fleet) both have; the fleet starts at its older cursor", async () => {
  await withTmpDir(async (dir) => {
    const log = silentLogger();
    const storage = new StoragePart(join(dir, "d"), [SAMPLE_MIGRATIONS, FLEET_MIGRATIONS], log);
    const samples = new SampleStore(storage, { retentionBytes: 64 * 1024 * 1024, log });
    storage.start();
    samples.start();
    storage.db.prepare("UPDATE fl_state SET value = 2 WHERE key = 'telemetry_cursor'").run();
    const push = samples.consumer("push", { inRow: true });
    const fleet = telemetryConsumer(samples, storage);
    for (let i = 0; i < 10; i++) samples.append(snapshot(i));
    const rows = () => storage.telemetryDb.prepare("SELECT count(*) FROM tm_snapshot").pluck().get() as number;
    assert.equal(fleet.through, 2, "where the fleet's older cursor was");
    push.settleThrough(10); // HTTPS has all ten
    samples.persistCursor();
    assert.equal(rows(), 8, "the fleet has two: the rest kept");
    assert.equal(samples.stats().pending_snapshots, 0, "HTTPS progress is its own");
    assert.equal(fleet.backlog, 8);
    fleet.settleThrough(4);
    samples.persistCursor();
    assert.equal(rows(), 6);
    assert.deepEqual(
      fleet.pending(100).map((s) => s.id),
      [5, 6, 7, 8, 9, 10],
    );
    fleet.settleThrough(10);
    samples.persistCursor();
    assert.equal(rows(), 0);
    assert.equal(
      storage.telemetryDb.prepare("SELECT value FROM tm_state WHERE key = 'cursor:fleet_telemetry'").pluck().get(),
      10,
      "the fleet's cursor persisted in the store",
    );
    samples.stop();
    storage.stop();
  });
});
