// The fleet's retained status carries the /healthz warnings, and is published again when
// their codes change (not when only a message's figures do: a count of seconds would
// rewrite the retained status every second).
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SiteState, type SiteStateDeps } from "../../src/fleet/site-state.js";
import { silentLogger } from "../../src/log.js";

test("status carries the /healthz warnings and follows their codes", () => {
  const root = mkdtempSync(join(tmpdir(), "sitegate-status-"));
  const saved = process.env.SITEGATE_ROOT;
  process.env.SITEGATE_ROOT = root; // no update state: last_update null
  try {
    let warnings = [{ code: "tls_cert_expiring", message: "the HTTPS certificate expires in 9 days" }];
    const deps = {
      devices: { list: () => [] },
      config: { site_id: "site-001" },
      log: silentLogger(),
      dispatch: { running: () => 0 },
      warnings: () => warnings,
    } as unknown as SiteStateDeps;
    const sent: Array<{ topic: string; json: any }> = [];
    const state = new SiteState(
      deps,
      (sub) => `sitegate/site-001/${sub}`,
      (topic, payload, _opts, done) => {
        sent.push({ topic, json: JSON.parse(payload) });
        done();
      },
      0,
    );
    const statuses = () => sent.filter((m) => m.topic.endsWith("/status")).map((m) => m.json);
    state.publish(true);
    assert.deepEqual(statuses()[0].warnings, warnings);
    warnings = [{ code: "tls_cert_expiring", message: "the HTTPS certificate expires in 8 days" }];
    state.publish(false);
    assert.equal(statuses().length, 1, "the same codes: not published again");
    warnings = [...warnings, { code: "part_not_running", message: "zigbee is not running" }];
    state.publish(false);
    assert.equal(statuses().length, 2);
    assert.deepEqual(
      statuses()[1].warnings.map((w: { code: string }) => w.code),
      ["tls_cert_expiring", "part_not_running"],
    );
    warnings = [];
    state.publish(false);
    assert.deepEqual(statuses()[2].warnings, [], "cleared");
  } finally {
    if (saved === undefined) delete process.env.SITEGATE_ROOT;
    else process.env.SITEGATE_ROOT = saved;
    rmSync(root, { recursive: true, force: true });
  }
});
