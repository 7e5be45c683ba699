// Property: a config check-config accepts starts. Configs are generated around the fields
// where a start used to fail after check-config said ok (listen ports, time zones, URL
// schemes, TLS and CA files), valid and invalid alike; each one parseConfig (check-config's
// and run's validation) accepts is started for real, in this process, on a free port:
// every part must start (no essential part fails, none is left retrying) and stop again.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import fc from "fast-check";
import { parseConfig } from "../../src/load-config.js";
import { buildDaemon } from "../../src/daemon.js";
import { silentLogger } from "../../src/log.js";
import { isSitegateError } from "../../src/errors.js";
import { testConfigInput } from "../support/config.js";
import { testCert, untrustedCert } from "../support/tls.js";
import { withTmpDir } from "../support/tmp.js";
import { freePort } from "../support/net.js";

/** Mostly what a site would write, sometimes what run cannot use: `weight` to 1. */
function mostly<T>(good: fc.Arbitrary<T>, bad: fc.Arbitrary<T>, weight = 6): fc.Arbitrary<T> {
  return fc.oneof({ arbitrary: good, weight }, { arbitrary: bad, weight: 1 });
}

const zone = (good: string[]) => mostly(fc.constantFrom(...good), fc.constantFrom("Mars/Olympus_Mons", "Europe/Atlantis", "local/time"));

/** A listen address: "free" becomes a free port at start (a port in use is the machine's, not the config's). */
const listen = fc.record({
  host: fc.constantFrom("127.0.0.1", "localhost", "[::1]"),
  port: mostly<number | "free">(fc.constant("free"), fc.integer({ min: 65_536, max: 99_999 }), 12),
});

const generated = fc.record({
  api: listen,
  ui: fc.option(fc.record({ enabled: fc.boolean(), listen: fc.option(listen, { nil: undefined }) }), { nil: undefined }),
  maintenance: fc.record({
    at: fc.constantFrom("00:00", "03:30", "23:59"),
    timezone: zone(["local", "UTC", "Europe/Berlin", "Australia/Sydney", "America/Argentina/Buenos_Aires"]),
  }),
  schedules: fc.array(zone(["UTC", "Europe/Berlin", "Pacific/Auckland"]), { maxLength: 2 }),
  key: mostly(fc.constant("good"), fc.constantFrom("directory", "garbage", "other")),
  ca: mostly(fc.constantFrom("good", "none"), fc.constant("garbage")),
  zigbee: fc.option(
    mostly(fc.constantFrom("mqtt://127.0.0.1:9", "mqtts://127.0.0.1:9"), fc.constantFrom("ws://127.0.0.1:9", "http://127.0.0.1:9")),
    {
      nil: undefined,
    },
  ),
  pollMs: fc.integer({ min: 100, max: 5000 }),
  commitS: fc.integer({ min: 1, max: 60 }),
});

type Generated = typeof generated extends fc.Arbitrary<infer T> ? T : never;

async function address(l: { host: string; port: number | "free" }): Promise<string> {
  return `${l.host}:${l.port === "free" ? await freePort() : l.port}`;
}

async function configFor(g: Generated, dir: string, otherKey: string): Promise<Record<string, any>> {
  const cfg = testConfigInput(join(dir, "data")) as Record<string, any>;
  cfg.http.listen = await address(g.api);
  if (g.ui) cfg.ui = { enabled: g.ui.enabled, ...(g.ui.listen ? { listen: await address(g.ui.listen) } : {}) };
  cfg.maintenance = g.maintenance;
  cfg.schedules = g.schedules.map((timezone, i) => ({
    name: `s${i}`,
    cron: "0 1 * * *",
    timezone,
    duration_s: 600,
    event_type: "charge",
    event_quantity: 1,
    event_unit: "kW",
  }));
  const bad = join(dir, "garbage.pem");
  writeFileSync(bad, "garbage\n");
  mkdirSync(join(dir, "a-directory"), { recursive: true });
  cfg.http.tls.key = {
    good: testCert().keyFile,
    directory: join(dir, "a-directory"),
    garbage: bad,
    other: otherKey,
  }[g.key];
  if (g.ca === "none") delete cfg.partner.ca_file;
  else cfg.partner.ca_file = g.ca === "good" ? testCert().certFile : bad;
  if (g.zigbee) cfg.zigbee = { url: g.zigbee, devices: [] };
  cfg.telemetry = { poll_interval_ms: g.pollMs, retention_max_mb: 64, commit_interval_s: g.commitS };
  return cfg;
}

test("every generated config that check-config accepts starts, with every part running", async () => {
  let started = 0;
  let refused = 0;
  await withTmpDir(async (keys) => {
    const otherKey = untrustedCert(keys).keyFile;
    await fc.assert(
      fc.asyncProperty(generated, async (g) => {
        await withTmpDir(async (dir) => {
          let config;
          try {
            config = parseConfig(await configFor(g, dir, otherKey), dir);
          } catch (e) {
            if (!isSitegateError(e, "CONFIG_INVALID")) throw e;
            refused++;
            return;
          }
          const daemon = buildDaemon(config, silentLogger());
          try {
            await daemon.start();
            const down = daemon.warnings().filter((w) => w.code === "part_not_running");
            assert.deepEqual(down, [], "no part left retrying its start");
            started++;
          } finally {
            await daemon.stop();
          }
        });
      }),
      { numRuns: 40, seed: 31 },
    );
  });
  console.log(`generated configs: ${started} accepted and started, ${refused} refused`);
  assert.ok(started >= 3, `the property ran on accepted configs (${started} of 40)`);
});
