// Release versions order by semver 2.0 precedence, pre-releases included.
import { test } from "node:test";
import assert from "node:assert/strict";
import { BundleRefused, compareVersions, isValidVersion } from "../../src/update/bundle-format.js";

test("versions order by semver precedence, pre-release identifiers one by one", () => {
  const ordered = [
    "0.9.9",
    "0.10.0",
    "1.0.0-alpha",
    "1.0.0-alpha.1",
    "1.0.0-alpha.beta",
    "1.0.0-beta",
    "1.0.0-beta.2",
    "1.0.0-beta.11",
    "1.0.0-rc.1",
    "1.0.0-rc.9",
    "1.0.0-rc.10",
    "1.0.0",
    "1.0.1-0",
    "1.0.1",
    "2.0.0",
  ];
  for (let i = 0; i < ordered.length; i++) {
    for (let j = 0; j < ordered.length; j++) {
      assert.equal(Math.sign(compareVersions(ordered[i], ordered[j])), Math.sign(i - j), `${ordered[i]} vs ${ordered[j]}`);
    }
  }
  assert.equal(compareVersions("1.0.0+build.5", "1.0.0"), 0, "build metadata does not order");
  assert.deepEqual(["1.0.0-rc.10", "1.0.0", "1.0.0-rc.9"].sort(compareVersions), ["1.0.0-rc.9", "1.0.0-rc.10", "1.0.0"]);
  assert.ok(compareVersions("20.19.0", "20.0.0") > 0, "Node.js versions too");
});

test("only x.y.z[-pre] is a release version; anything else is refused, not guessed", () => {
  for (const v of ["1.2.3", "1.2.3-beta.1", "0.0.0-0"]) assert.ok(isValidVersion(v), v);
  for (const v of ["1.2", "01.2.3", "1.2.3-01", "v1.2.3", "1.2.3+b", "../x", "1.2.3-", "1.2.3-a..b"]) assert.ok(!isValidVersion(v), v);
  assert.throws(() => compareVersions("1.2", "1.2.0"), BundleRefused);
});
