import { test } from "node:test";
import assert from "node:assert/strict";
import { MinuteHistory, HISTORY_MINUTES } from "../../src/ui/history.js";
import { LoginThrottle, Sessions } from "../../src/ui/session.js";

const M = 60_000;
const t0 = Date.UTC(2026, 0, 1, 12, 0, 0);
const snap = (ts: number, v: number) => ({ ts, devices: [{ device_id: "bat", metrics: { power_w: v } }] });

test("history keeps one mean per minute, leaves gaps out and forgets what is older than 24 h", () => {
  const h = new MinuteHistory();
  h.observe(snap(t0, 100));
  h.observe(snap(t0 + 30_000, 300));
  h.observe(snap(t0 + M, 50)); // minute 2
  h.observe(snap(t0 + 3 * M, 70)); // minute 4; minute 3 is a gap
  assert.deepEqual(h.points("bat", "power_w", t0 + 3 * M), [
    [t0, 200],
    [t0 + M, 50],
    [t0 + 3 * M, 70],
  ]);
  // A day later the old minutes are gone, the ring reused.
  const later = t0 + HISTORY_MINUTES * M + 2 * M;
  h.observe(snap(later, 9));
  assert.deepEqual(h.points("bat", "power_w", later), [
    [t0 + 3 * M, 70],
    [later, 9],
  ]);
  assert.deepEqual(h.points("bat", "soc_pct", later), []);
});

test("failed logins: refused after 5 in the window, free again when they leave it; success clears", () => {
  let now = 0;
  const t = new LoginThrottle(5, 60_000, () => now);
  for (let i = 0; i < 5; i++) {
    assert.equal(t.retryAfterS("1.2.3.4"), 0);
    t.fail("1.2.3.4");
  }
  assert.equal(t.retryAfterS("1.2.3.4"), 60);
  assert.equal(t.retryAfterS("5.6.7.8"), 0, "per source");
  now = 60_001;
  assert.equal(t.retryAfterS("1.2.3.4"), 0);
  t.fail("1.2.3.4");
  t.succeed("1.2.3.4");
  assert.equal(t.retryAfterS("1.2.3.4"), 0);
});

test("sessions expire", () => {
  let now = 0;
  const s = new Sessions(1000, () => now);
  const { id } = s.create("partner");
  assert.equal(s.get(id)?.user, "partner");
  assert.equal(s.get("other"), undefined);
  now = 1000;
  assert.equal(s.get(id), undefined);
});
