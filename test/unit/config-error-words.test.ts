// The words of config errors: the nearest known key for a mistyped one, and secret values
// masked by key name in the lines a problem shows.
import { test } from "node:test";
import assert from "node:assert/strict";
import { editDistance, nearest } from "../../src/util/nearest.js";
import { maskLine, shownValue } from "../../src/config/secret-mask.js";

test("edit distance counts insertions, deletions, substitutions and a swap of neighbours as one each", () => {
  assert.equal(editDistance("poll_interval", "poll_interval_ms"), 3);
  assert.equal(editDistance("retention", "retnetion"), 1);
  assert.equal(editDistance("", "abc"), 3);
  assert.equal(editDistance("same", "same"), 0);
});

test("nearest: a slip or a left-off suffix is suggested, an unrelated word is not", () => {
  const keys = ["poll_interval_ms", "retention_max_mb", "commit_interval_s"];
  assert.equal(nearest("poll_interval", keys), "poll_interval_ms");
  assert.equal(nearest("retention_max_md", keys), "retention_max_mb");
  assert.equal(nearest("comit_interval_s", keys), "commit_interval_s");
  assert.equal(nearest("colour", keys), undefined);
  assert.equal(nearest("sdm631", ["sdm630", "sdm120", "sunspec"]), "sdm630");
  assert.equal(nearest("warp-drive", ["sdm630", "sdm120", "sunspec"]), undefined);
});

test("maskLine hides the values of secret keys, block and flow, quoted or not, and keeps the rest", () => {
  assert.equal(
    maskLine('    - { username: partner, password_hash: "scrypt$1$2", x: 1 }'),
    "    - { username: partner, password_hash: ***, x: 1 }",
  );
  assert.equal(maskLine("  password: hunter2 two # a comment"), "  password: *** # a comment");
  assert.equal(
    maskLine('  headers: [{ name: X-Key, value: "a,b" }, { name: Y, value: plain }]'),
    "  headers: [{ name: X-Key, value: *** }, { name: Y, value: *** }]",
  );
  assert.equal(maskLine('key_hash: "never closed'), "key_hash: ***");
  assert.equal(maskLine("  token: abc"), "  token: ***");
  assert.equal(maskLine("  listen: 0.0.0.0:8443"), "  listen: 0.0.0.0:8443");
  assert.equal(
    maskLine("  password_file: /etc/sitegate/pw"),
    "  password_file: /etc/sitegate/pw",
    "a file that holds a secret is no secret",
  );
});

test("a found value is quoted and shortened; under a secret key only its length is told", () => {
  assert.equal(shownValue("x".repeat(80), false), JSON.stringify(`${"x".repeat(57)}...`));
  assert.equal(shownValue("hunter2", true), "a value of 7 characters (not shown)");
  assert.equal(shownValue(null, false), "nothing (an empty value)");
  assert.equal(shownValue([1, 2], false), "a list of 2 items");
});
