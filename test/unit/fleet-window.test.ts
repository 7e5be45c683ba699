// The fleet's telemetry window follows the broker's Receive Maximum: all of it, up to 64
// (it was Receive Maximum - 8 capped at 32: 12 against mosquitto's 20, 2 against 10).
import { test } from "node:test";
import assert from "node:assert/strict";
import { telemetryWindow, TELEMETRY_WINDOW } from "../../src/fleet/streams.js";

test("the telemetry window is the broker's Receive Maximum, at most 64", () => {
  assert.equal(telemetryWindow(20), 20, "mosquitto's default");
  assert.equal(telemetryWindow(10), 10);
  assert.equal(telemetryWindow(1), 1);
  assert.equal(telemetryWindow(65_535), 64, "a broker that announces none");
  assert.equal(TELEMETRY_WINDOW, 64);
});
