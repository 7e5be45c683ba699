import { test } from "node:test";
import assert from "node:assert/strict";
import { EventBus } from "../../src/event-bus.js";
import { createLogger } from "../../src/log.js";

interface Events {
  snapshot: [ts: number];
  input: [line: number, active: boolean];
}

function recordingBus() {
  const lines: Array<Record<string, unknown>> = [];
  const destination = { write: (s: string) => lines.push(JSON.parse(s)) } as unknown as NodeJS.WritableStream;
  const bus = new EventBus<Events>(createLogger({ level: "info", pretty: false, journal: false, destination }));
  return { bus, lines };
}

test("a listener that throws is logged with its part's name and the listeners after it still run", () => {
  const { bus, lines } = recordingBus();
  const seen: string[] = [];
  bus.on("snapshot", "samples", (ts) => void seen.push(`samples ${ts}`));
  bus.on("snapshot", "ui", () => {
    throw new Error("chart broke");
  });
  bus.on("snapshot", "dispatch", (ts) => void seen.push(`dispatch ${ts}`));
  assert.doesNotThrow(() => bus.emit("snapshot", 1));
  bus.emit("snapshot", 2);
  assert.deepEqual(seen, ["samples 1", "dispatch 1", "samples 2", "dispatch 2"]);
  assert.equal(bus.failureCount("ui", "snapshot"), 2);
  assert.equal(bus.failureCount("samples", "snapshot"), 0);
  // logged once, not on every snapshot
  assert.equal(lines.length, 1);
  assert.equal(lines[0].listener, "ui");
  assert.equal(lines[0].event, "snapshot");
  assert.match(String(lines[0].err), /chart broke/);
  const fam = bus.metrics()[0];
  assert.equal(fam.name, "sitegate_event_listener_failures_total");
  assert.deepEqual(fam.values, [{ labels: { part: "ui", event: "snapshot" }, value: 2 }]);
});

test("a listener's rejected promise is caught and counted, never unhandled", async () => {
  const { bus, lines } = recordingBus();
  let unhandled = 0;
  const onUnhandled = () => unhandled++;
  process.on("unhandledRejection", onUnhandled);
  try {
    // The listener fails after the emit has returned: its promise is rejected by the test.
    let fail!: (e: Error) => void;
    bus.on("input", "input-events", () => new Promise<void>((_, reject) => (fail = reject)));
    bus.emit("input", 4, true);
    assert.equal(bus.failureCount("input-events", "input"), 0);
    fail(new Error("late failure"));
    // One turn of the event loop: node reports an unhandled rejection before the next turn.
    await new Promise((r) => setImmediate(r));
  } finally {
    process.off("unhandledRejection", onUnhandled);
  }
  assert.equal(unhandled, 0);
  assert.equal(bus.failureCount("input-events", "input"), 1);
  assert.equal(lines[0].listener, "input-events");
});

test("off(part) removes every listener of that part, on every event, and only those", () => {
  const { bus } = recordingBus();
  const seen: string[] = [];
  bus.on("snapshot", "ui", () => void seen.push("ui snapshot"));
  bus.on("input", "ui", () => void seen.push("ui input"));
  bus.on("snapshot", "samples", () => void seen.push("samples snapshot"));
  bus.off("ui");
  bus.emit("snapshot", 1);
  bus.emit("input", 1, false);
  assert.deepEqual(seen, ["samples snapshot"]);
});

test("emitter() is emit bound to one event, with its arguments typed", () => {
  const { bus } = recordingBus();
  const got: Array<[number, boolean]> = [];
  bus.on("input", "input-events", (line, active) => void got.push([line, active]));
  const changed: (line: number, active: boolean) => void = bus.emitter("input");
  changed(7, true);
  assert.deepEqual(got, [[7, true]]);
});
