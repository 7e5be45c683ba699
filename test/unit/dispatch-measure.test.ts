// The time-weighted delivered mean (src/dispatch/measure.ts) on hand-made sample series.
import { test } from "node:test";
import assert from "node:assert/strict";
import { addSample, meanUntil } from "../../src/dispatch/measure.js";

const HOLD = 5000;

test("a second reading at the same instant replaces the first: it held for no time", () => {
  // Three setpoint writes in one tick, each followed by its confirmation read: 100, 400, 500 W.
  let s = addSample(undefined, 1000, 100, HOLD);
  s = addSample(s, 1000, 400, HOLD);
  s = addSample(s, 1000, 500, HOLD);
  assert.equal(meanUntil(s, 2000, HOLD), 500);
});

test("a reading stamped before the latest is dropped (a poll under way during the write)", () => {
  let s = addSample(undefined, 1000, 500, HOLD);
  s = addSample(s, 900, 0, HOLD);
  assert.equal(meanUntil(s, 2000, HOLD), 500);
});
