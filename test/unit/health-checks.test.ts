// The watchdog's bus check and the certificate-expiry rule, on a real database and the
// test certificate, with the clock passed in.
import { test } from "node:test";
import assert from "node:assert/strict";
import { X509Certificate } from "node:crypto";
import { HealthMonitor, HEALTH_MIGRATIONS } from "../../src/health.js";
import { certificateWarning } from "../../src/maintenance.js";
import { SystemdNotifier } from "../../src/systemd/notify.js";
import { StoragePart } from "../../src/storage/part.js";
import { silentLogger } from "../../src/log.js";
import { withTmpDir } from "../support/tmp.js";
import { testCert } from "../support/tls.js";

test("a bus with work and no finished request for 30 s fails the check; progress or idleness passes", async () => {
  await withTmpDir((dir) => {
    const storage = new StoragePart(dir, [HEALTH_MIGRATIONS], silentLogger());
    storage.start();
    try {
      const bus = { key: "tcp://10.0.0.9:502", busy: true, queued: 3, stats: { busy_ms: 10 } };
      const mon = new HealthMonitor(
        {
          storage,
          buses: () => [bus],
          devices: () => ({ configured: 1, online: 0 }),
          readsOk: () => 0,
          backlog: () => ({ outbox: 0, snapshots: 0 }),
        },
        new SystemdNotifier(silentLogger(), {}),
        silentLogger(),
        { busStuckMs: 30_000 },
      );
      assert.deepEqual(mon.check(1_000).failures, []);
      assert.deepEqual(mon.check(25_000).failures, [], "not stuck yet");
      assert.deepEqual(mon.check(40_000).failures, ["bus tcp://10.0.0.9:502 stuck 39 s"]);
      bus.stats.busy_ms = 11; // a request finished
      assert.deepEqual(mon.check(41_000).failures, []);
      bus.busy = false;
      bus.queued = 0; // nothing to do: never stuck
      assert.deepEqual(mon.check(500_000).failures, []);
    } finally {
      storage.stop();
    }
  });
});

test("while a check fails, the monitor's health() names it; once checks pass the warning goes", async () => {
  await withTmpDir(async (dir) => {
    const storage = new StoragePart(dir, [HEALTH_MIGRATIONS], silentLogger());
    storage.start();
    const bus = { key: "rtu:/dev/ttyS1", busy: true, queued: 1, stats: { busy_ms: 10 } };
    const mon = new HealthMonitor(
      {
        storage,
        buses: () => [bus],
        devices: () => ({ configured: 0, online: 0 }),
        readsOk: () => 0,
        backlog: () => ({ outbox: 0, snapshots: 0 }),
      },
      new SystemdNotifier(silentLogger(), {}),
      silentLogger(),
      { statusEveryMs: 20, busStuckMs: 30, stallMs: 5000 },
    );
    mon.start();
    try {
      assert.deepEqual(mon.health().warnings, []);
      const stuck = () =>
        mon.health().warnings.some((w) => w.code === "health_checks_failing" && /bus rtu:\/dev\/ttyS1 stuck/.test(w.message));
      for (let i = 0; i < 100 && !stuck(); i++) await new Promise((r) => setTimeout(r, 10));
      assert.ok(stuck(), JSON.stringify(mon.health()));
      assert.ok(mon.stats.withheld > 0);
      bus.busy = false;
      bus.queued = 0;
      for (let i = 0; i < 100 && mon.health().warnings.length > 0; i++) await new Promise((r) => setTimeout(r, 10));
      assert.deepEqual(mon.health().warnings, []);
    } finally {
      await mon.stop();
      storage.stop();
    }
  });
});

test("the certificate warning starts 14 days before expiry and says when it expires", () => {
  const { cert, certFile } = testCert();
  const expires = Date.parse(new X509Certificate(cert).validTo);
  const day = 86_400_000;
  assert.equal(certificateWarning(cert, certFile, expires - 15 * day), null);
  const soon = certificateWarning(cert, certFile, expires - 13.5 * day);
  assert.equal(soon?.code, "tls_cert_expiring");
  assert.match(soon!.message, /in 13 days$/);
  assert.equal(certificateWarning(cert, certFile, expires + day)?.code, "tls_cert_expired");
});

test("a telemetry commit up to the longest commit interval (60 s) and a poll ago stands for the write probe: no probe row on the SD card", async () => {
  await withTmpDir((dir) => {
    const storage = new StoragePart(dir, [HEALTH_MIGRATIONS], silentLogger());
    storage.start();
    try {
      const mon = new HealthMonitor(
        {
          storage,
          buses: () => [],
          devices: () => ({ configured: 0, online: 0 }),
          readsOk: () => 0,
          backlog: () => ({ outbox: 0, snapshots: 0 }),
        },
        new SystemdNotifier(silentLogger(), {}),
        silentLogger(),
      );
      const probes = () => storage.db.prepare("SELECT count(*) FROM health_probe").pluck().get() as number;
      storage.noteCommit(1_000); // a telemetry commit
      for (const at of [11_000, 31_500, 61_000, 62_000]) {
        assert.deepEqual(mon.check(at).failures, []);
        assert.equal(probes(), 0, `${(at - 1_000) / 1000} s after a commit: no probe write`);
      }
      // Nothing committed for longer than any commit interval: the probe writes.
      assert.deepEqual(mon.check(70_000).failures, []);
      assert.equal(probes(), 1);
    } finally {
      storage.stop();
    }
  });
});
