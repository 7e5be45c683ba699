// Retry-After (RFC 9110 10.2.3): delta-seconds or an HTTP date, read against an injected now.
import { test } from "node:test";
import assert from "node:assert/strict";
import { parseRetryAfter } from "../../src/uplink/http-sender.js";

const NOW = Date.UTC(2026, 10, 22, 12, 0, 0);

test("Retry-After in seconds is that many milliseconds", () => {
  assert.equal(parseRetryAfter("0", NOW), 0);
  assert.equal(parseRetryAfter(" 7 ", NOW), 7000);
  assert.equal(parseRetryAfter(["3", "9"], NOW), 3000, "the first of repeated headers");
});

test("Retry-After as an HTTP date is the time until that date, never negative", () => {
  assert.equal(parseRetryAfter("Sun, 22 Nov 2026 12:00:30 GMT", NOW), 30_000);
  assert.equal(parseRetryAfter(new Date(NOW + 90_000).toUTCString(), NOW), 90_000);
  assert.equal(parseRetryAfter("Sun, 22 Nov 2026 11:59:00 GMT", NOW), 0, "a date in the past: retry now");
});

test("an absent or unreadable Retry-After is undefined (the lane's own backoff applies)", () => {
  assert.equal(parseRetryAfter(undefined, NOW), undefined);
  assert.equal(parseRetryAfter("", NOW), undefined);
  assert.equal(parseRetryAfter("soon", NOW), undefined);
});
