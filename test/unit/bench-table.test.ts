import { test } from "node:test";
import assert from "node:assert/strict";
import { table } from "../bench/run.js";
import { flagSets, runInChild } from "../bench/in-child.js";

test("the bench table has one aligned row per figure with ratio and reference", () => {
  const out = table([
    { name: "tcp poll", value: 12345.6, unit: "reg/s", reference: 15000, ratio: 0.823, note: "mbpoll" },
    { name: "bytes per sample", value: 11.2, unit: "B", reference: 40.7, ratio: 3.63 },
    { name: "no ref", value: 0.5, unit: "ms", reference: null, ratio: null },
  ]).split("\n");
  assert.equal(out.length, 5);
  assert.match(out[2], /^tcp poll\s+12,346\s+reg\/s\s+15,000\s+0\.82x\s+mbpoll$/);
  assert.match(out[3], /bytes per sample\s+11\.2\s+B\s+40\.7\s+3\.63x/);
  assert.match(out[4], /no ref\s+0\.500\s+ms\s+-\s+-/);
});

test("a reference spawned for a ratio runs under the node flags it is given", async () => {
  const refs = new URL("../bench/references.js", import.meta.url).href;
  const unit = flagSets().unit;
  assert.ok(unit.nodeArgs.includes("--jitless"), `the unit's flags: ${unit.nodeArgs.join(" ")}`);
  assert.deepEqual(await runInChild<string[]>(refs, "nodeFlags", null, unit), unit.nodeArgs);
  assert.deepEqual(await runInChild<string[]>(refs, "nodeFlags", null, flagSets().plain), []);
});
