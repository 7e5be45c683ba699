// A scan's answers in an installer's words (`sitegate scan` and the status page): what each
// unit is, or that it answers and no profile knows it; never the raw answer as if it were an error.
import { test } from "node:test";
import assert from "node:assert/strict";
import { scanWords } from "../../src/modbus/device/scan-words.js";
import { builtinProfiles } from "../../src/profiles/registry.js";

const profiles = builtinProfiles();

test("a SunSpec unit is named by the role its models give it, a fixed profile's by its description", () => {
  const sunspec = (role?: string) => [{ profile: "sunspec", identity: { sunspec_base: "40000", ...(role ? { role } : {}) } }];
  assert.equal(scanWords({ unit: 1, answer: "registers" }, sunspec("pv"), profiles), "unit 1: SunSpec inverter (profile sunspec)");
  assert.equal(
    scanWords({ unit: 2, answer: "registers" }, sunspec("battery"), profiles),
    "unit 2: SunSpec battery inverter (profile sunspec)",
  );
  assert.equal(scanWords({ unit: 3, answer: "registers" }, sunspec("meter"), profiles), "unit 3: SunSpec meter (profile sunspec)");
  assert.equal(scanWords({ unit: 5, answer: "registers" }, sunspec(), profiles), "unit 5: SunSpec device (profile sunspec)");
  assert.equal(
    scanWords({ unit: 7, answer: "registers" }, [{ profile: "huawei-sun2000", identity: {} }], profiles),
    "unit 7: Huawei SUN2000 hybrid inverter with LUNA2000 battery (profile huawei-sun2000)",
  );
  assert.equal(
    scanWords({ unit: 9, answer: "registers" }, [{ profile: "sdm120", identity: {} }], profiles),
    "unit 9: Eastron SDM120 (profile sdm120)",
  );
});

test("a unit no profile knows answers, not a known device; an exception is how it answered, not an error", () => {
  assert.equal(scanWords({ unit: 4, answer: "exception 2" }, [], profiles), "unit 4: answers, not a known device");
  assert.equal(scanWords({ unit: 4, answer: "registers" }, [], profiles), "unit 4: answers, not a known device");
  // Without identification the scan knows only that it answers.
  assert.equal(scanWords({ unit: 12, answer: "exception 2" }, undefined, profiles), "unit 12: answers");
  for (const w of [
    scanWords({ unit: 4, answer: "exception 2" }, [], profiles),
    scanWords({ unit: 4, answer: "exception 2" }, undefined, profiles),
  ])
    assert.doesNotMatch(w, /exception|answered \(/);
});
