import { test } from "node:test";
import assert from "node:assert/strict";
import { nodeMinFromEngines, prebuildMatches } from "../../src/update/bundle.js";

test("prebuild folders and files are matched to the arch exactly (arm does not keep arm64, musl is dropped)", () => {
  assert.equal(prebuildMatches("linux-arm64", "arm64"), true);
  assert.equal(prebuildMatches("linux-arm64", "arm"), false, "the prefix linux-arm must not match linux-arm64");
  assert.equal(prebuildMatches("linux-arm", "arm"), true);
  assert.equal(prebuildMatches("linux-arm", "arm64"), false);
  assert.equal(prebuildMatches("linux-x64+arm64", "arm64"), true);
  assert.equal(prebuildMatches("linux-arm64.node", "arm64"), true, "better-sqlite3 13 names files, not folders");
  assert.equal(prebuildMatches("linuxmusl-arm64.node", "arm64"), false);
  assert.equal(prebuildMatches("darwin-x64+arm64", "arm64"), false);
  assert.equal(prebuildMatches("android-arm64", "arm64"), false);
  assert.equal(prebuildMatches("linux", "arm64"), false);
});

test("engines ranges give the manifest's node_min", () => {
  assert.equal(nodeMinFromEngines(">=24.21.0 <25"), "24.21.0");
  assert.equal(nodeMinFromEngines("24"), "24.0.0");
});
