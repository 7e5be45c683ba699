// The status page's pure pieces: templates filled everywhere, op modes named, and the
// Buses page's utilisation over a rolling window on an injected clock.
import { test } from "node:test";
import assert from "node:assert/strict";
import { fillTemplate } from "../../src/ui/plugin.js";
import { BUS_WINDOW_MS, BusView, endReason, type UiDeps } from "../../src/ui/views.js";
import { emptyProgress } from "../../src/dispatch/store.js";
import { opModeWords } from "../../src/model/roles.js";

test("a template's placeholders are replaced every time they appear; values are never replacement patterns", () => {
  const tpl = "<title>{{site}}</title><h1>{{site}}</h1>{{ message }}";
  assert.equal(fillTemplate(tpl, { site: "site-001", message: "$& $1" }), "<title>site-001</title><h1>site-001</h1>$& $1");
  assert.throws(() => fillTemplate("{{site}} {{csrf}}", { site: "x" }), /no value for \{\{csrf\}\}/);
});

test("op modes are named as device sync describes them", () => {
  assert.deepEqual([0, 1, 2, 3, 4, 9].map(opModeWords), ["unknown", "local automatic", "remote dispatch", "standby", "fault", "op mode 9"]);
});

test("bus utilisation has a figure at the first look and covers the last minute", () => {
  let now = 1000;
  const bus = {
    key: "tcp://x",
    endpoint: { kind: "tcp" },
    queued: 0,
    stats: { busy_ms: 0, requests: 0, failures: 0, timeouts: 0, reconnects: 0 },
  };
  const deps = { buses: { all: () => [bus] } } as unknown as UiDeps;
  const view = new BusView(deps, () => now);
  view.sample(); // what start() does when the status page is mounted
  now += 1000;
  bus.stats.busy_ms += 250;
  assert.equal(view.list()[0].utilisation, 0.25, "first look: busy since the first sample");
  // A minute of 10 % after it: the first second's 25 % falls out of the window.
  for (let i = 0; i < BUS_WINDOW_MS / 1000 + 2; i++) {
    view.sample();
    now += 1000;
    bus.stats.busy_ms += 100;
  }
  assert.ok(Math.abs(view.list()[0].utilisation! - 0.1) < 1e-9, String(view.list()[0].utilisation));
  // A bus that is gone leaves the samples.
  deps.buses.all = () => [];
  view.sample();
  assert.deepEqual(view.list(), []);
});

test("an event says why it ended: completed, ended by restore, cancelled, missed; nothing while it is open", () => {
  const row = (
    state: "scheduled" | "running" | "done" | "cancelled" | "missed",
    ended_by?: string,
    receipt: "accepted" | "cancelled" = "accepted",
  ) => ({
    state,
    receipt,
    progress: { ...emptyProgress(), ...(ended_by ? { ended_by } : {}) },
  });
  assert.equal(endReason(row("scheduled")), null);
  assert.equal(endReason(row("running")), null);
  assert.equal(endReason(row("done")), "completed");
  assert.equal(endReason(row("done", "ended by restore 280a8ad8-1111-4222-8333-944445555666")), "ended by restore 280a8ad8");
  assert.equal(endReason(row("cancelled", undefined, "cancelled")), "cancelled");
  assert.equal(endReason(row("done", undefined, "cancelled")), "cancelled", "cancelled while it ran");
  assert.equal(endReason(row("cancelled", "input door released", "cancelled")), "cancelled (input door released)");
  assert.equal(endReason(row("missed")), "missed: the gateway was down");
});
