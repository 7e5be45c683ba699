// Versions, and the marker the daemon writes for the update gate.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { compareVersions, isValidVersion } from "../../src/update/bundle-format.js";
import { healthMarkerPath, ReleaseHealthPart } from "../../src/update/health-marker.js";
import { nodeMinFromEngines } from "../../src/update/bundle.js";
import { silentLogger } from "../../src/log.js";
import { withTmpDir } from "../support/tmp.js";
import { until } from "../support/wait.js";

test("versions compare numerically, a pre-release before its release", () => {
  assert.ok(compareVersions("0.10.0", "0.9.9") > 0);
  assert.ok(compareVersions("1.0.0-rc.1", "1.0.0") < 0);
  assert.equal(compareVersions("1.2.3", "1.2.3"), 0);
  assert.ok(compareVersions("20.19.0", "20.0.0") > 0);
  assert.ok(isValidVersion("1.2.3-beta.1") && !isValidVersion("1.2") && !isValidVersion("../x"));
  assert.equal(nodeMinFromEngines(">=20"), "20.0.0");
  assert.equal(nodeMinFromEngines(">=20.3.1"), "20.3.1");
});

test("the release health part writes the marker once the probe holds, not before", async () => {
  await withTmpDir(async (dir) => {
    let ok = false;
    let asked = 0;
    const part = new ReleaseHealthPart(dir, "1.2.3", { healthy: () => (asked++, ok) }, silentLogger(), 20);
    part.start();
    try {
      await until(() => asked >= 3, "the probe asked three times");
      assert.equal(existsSync(healthMarkerPath(dir, "1.2.3")), false, "no marker while the probe fails");
      ok = true;
      await until(() => existsSync(healthMarkerPath(dir, "1.2.3")), "the marker");
      assert.equal(JSON.parse(readFileSync(join(dir, "update", "healthy-1.2.3"), "utf8")).version, "1.2.3");
    } finally {
      part.stop();
    }
  });
});
