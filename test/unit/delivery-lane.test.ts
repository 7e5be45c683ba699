// The one streaming engine: a lane's in-flight window and its cursor policy, over the
// sample store's source, with a sink whose answers the test gives one by one.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Lane, type Attempt, type LaneItem, type Sink } from "../../src/delivery/lane.js";
import { LaneGroup } from "../../src/delivery/lane-group.js";
import { SnapshotSource } from "../../src/delivery/snapshot-source.js";
import { silentLogger } from "../../src/log.js";
import type { StoredSnapshot, TelemetryCursor } from "../../src/telemetry/sample-store.js";

/** A cursor over snapshots 1..n, recording where it was settled to. */
function cursor(n: number): TelemetryCursor & { moves: number[] } {
  const snaps: StoredSnapshot[] = Array.from({ length: n }, (_, i) => ({
    id: i + 1,
    ts: 1_700_000_000_000 + i * 1000,
    devices: [{ device_id: "d", metrics: { power_w: i } }],
  }));
  const moves: number[] = [];
  return {
    name: "test",
    get through() {
      return moves.at(-1) ?? 0;
    },
    backlog: n,
    moves,
    pending: (limit, after = 0) => snaps.filter((s) => s.id > after).slice(0, limit),
    settleThrough: (id) => moves.push(id),
  };
}

/** A sink that keeps every attempt until the test answers it (or answers at once, within send). */
class HeldSink implements Sink {
  readonly held: Array<{ item: LaneItem; done: (a: Attempt) => void }> = [];
  sent = 0;
  constructor(private readonly atOnce?: Attempt) {}
  ready(): boolean {
    return true;
  }
  send(item: LaneItem, done: (a: Attempt) => void): void {
    this.sent++;
    // Refuses at once a few times, then accepts: a lane that ignored its backoff ends, and the test sees how often it asked.
    if (this.atOnce) return done(this.sent <= 5 ? this.atOnce : { outcome: "ok" });
    this.held.push({ item, done });
  }
  answer(ref: string, a: Attempt = { outcome: "ok" }): void {
    const i = this.held.findIndex((h) => h.item.ref === ref);
    assert.ok(i >= 0, `${ref} is in flight`);
    this.held.splice(i, 1)[0]!.done(a);
  }
  refs(): string[] {
    return this.held.map((h) => h.item.ref).sort();
  }
}

/** Lets the lane's loop run what is due (its wake-ups are promise continuations and immediates). */
const turn = () => new Promise((r) => setImmediate(r));

function lane(c: TelemetryCursor, sink: Sink, window: number, backoff = () => 60_000): Lane {
  const source = new SnapshotSource(c, {
    kind: "telemetry",
    address: "telemetry",
    encode: (s) => [{ body: JSON.stringify(s.devices), key: `k${s.id}` }],
    batch: window,
    maxAhead: 2 * window,
  });
  return new Lane("telemetry", source, sink, silentLogger(), backoff, window, {
    rejectWindowMs: Number.POSITIVE_INFINITY,
    idleRecheckMs: 60_000,
  });
}

test("a lane keeps its window full, and the cursor moves only over the prefix the sink has settled, whatever order the answers come in", async () => {
  const c = cursor(10);
  const sink = new HeldSink();
  const l = lane(c, sink, 3);
  l.start();
  try {
    await turn();
    assert.deepEqual(sink.refs(), ["s1:0", "s2:0", "s3:0"], "three in flight, oldest first");
    sink.answer("s3:0");
    sink.answer("s2:0");
    await turn();
    assert.deepEqual(c.moves, [], "1 is not settled: the cursor stays");
    assert.deepEqual(sink.refs(), ["s1:0", "s4:0", "s5:0"], "the window refilled with the next ones");
    sink.answer("s1:0");
    await turn();
    assert.deepEqual(c.moves, [3], "1, 2 and 3 in one move");
    l.resize(5);
    await turn();
    assert.equal(sink.held.length, 5, "a larger window is filled at once");
    for (const ref of sink.refs()) sink.answer(ref);
    await turn();
    assert.equal(c.through, 8);
  } finally {
    for (const h of sink.held.splice(0)) h.done({ outcome: "transient", error: "stopped" });
    await l.stop();
  }
});

test("a sink that refuses within send itself is not asked again before the backoff, and nothing newer is sent meanwhile", async () => {
  const c = cursor(5);
  const sink = new HeldSink({ outcome: "transient", error: "not authorized" });
  const l = lane(c, sink, 4);
  l.start();
  try {
    await turn();
    await turn();
    assert.equal(sink.sent, 1, "one attempt, then the backoff of a minute");
    assert.deepEqual(c.moves, []);
    assert.equal(l.stats.failures, 1);
  } finally {
    await l.stop();
  }
});

test("snapshots the store's size bound drops are not sent, also ones the source has read already", () => {
  const c = cursor(8);
  const source = new SnapshotSource(c, {
    kind: "data_push",
    address: "https://partner.example/push",
    encode: (s) => [{ body: String(s.id), key: `k${s.id}` }],
    batch: 4,
    maxAhead: 64,
  });
  const first = source.next(new Set());
  assert.equal(first?.ref, "s1:0", "1 to 4 read in one batch");
  c.moves.push(3); // what the store's retention does to every cursor when it drops rows unsent
  assert.equal(source.next(new Set())?.ref, "s4:0", "2 and 3 are gone");
  first!.settle();
  assert.deepEqual(c.moves, [3], "settling a dropped snapshot does not move the cursor back or on");
  assert.equal(source.next(new Set())?.ref, "s5:0");
});

test("an auth answer (401, 403, 404) holds the lane with the backoff, even where a final refusal is a dead letter at once; the lane drains in order after", async () => {
  const dead: string[] = [];
  const settled: string[] = [];
  const queue = ["m1", "m2", "m3"];
  const item = (ref: string): LaneItem => ({
    ref,
    address: "https://partner.example/exec",
    kind: "execution_response",
    body: "{}",
    key: `k-${ref}`,
    describe: { ref },
    settle: () => {
      settled.push(ref);
      queue.splice(queue.indexOf(ref), 1);
    },
    failed: () => undefined,
    // A dead letter leaves the lane, as it leaves the log.
    deadLetter: () => {
      dead.push(ref);
      queue.splice(queue.indexOf(ref), 1);
    },
  });
  const source = { next: (busy: ReadonlySet<string>) => queue.filter((r) => !busy.has(r)).map(item)[0] };
  const sink = new HeldSink();
  const waited: [number, string][] = [];
  const l = new Lane("execution", source, sink, silentLogger(), (n, address) => (waited.push([n, address]), 0), 1, {
    rejectWindowMs: 0,
    idleRecheckMs: 60_000,
  });
  l.start();
  try {
    await turn();
    for (const status of [401, 403, 404]) {
      assert.deepEqual(sink.refs(), ["m1"], `only the oldest is tried while held (${status})`);
      sink.answer("m1", { outcome: "auth", status, error: `HTTP ${status}` });
      assert.deepEqual(dead, [], `a ${status} dead-letters nothing`);
      await turn();
      await turn();
    }
    // The policy is asked with the message's attempt and address (its host sets the cap).
    const url = "https://partner.example/exec";
    assert.deepEqual(
      waited,
      [
        [1, url],
        [2, url],
        [3, url],
      ],
      "each refusal waited its backoff",
    );
    assert.deepEqual(dead, [], "nothing dead-lettered");
    assert.equal(l.stats.credentials_rejections, 3);
    assert.equal(l.stats.credentials_rejected?.status, 401, "warned since the first refusal");
    for (const ref of ["m1", "m2", "m3"]) {
      await turn();
      sink.answer(ref);
      await turn();
    }
    assert.deepEqual(settled, ["m1", "m2", "m3"], "in order once the partner accepts");
    assert.equal(l.stats.credentials_rejected, null, "the warning clears");
  } finally {
    await l.stop();
  }
});

test("a lane group: each lane on its own source and window into the one sink, its figures by name, all stopped together", async () => {
  const sink = new HeldSink();
  const group = new LaneGroup(sink, silentLogger(), () => 60_000, { rejectWindowMs: Number.POSITIVE_INFINITY, idleRecheckMs: 60_000 });
  const source = (c: TelemetryCursor, window: number, address: string) =>
    new SnapshotSource(c, {
      kind: address,
      address,
      encode: (s) => [{ body: "{}", key: `${address}${s.id}` }],
      batch: window,
      maxAhead: 2 * window,
    });
  const wide = cursor(5);
  group.open("wide", source(wide, 3, "w"), 3);
  group.open("narrow", source(cursor(5), 1, "n"), 1);
  await turn();
  assert.deepEqual(group.names(), ["wide", "narrow"]);
  assert.deepEqual(sink.held.map((h) => h.item.address).sort(), ["n", "w", "w", "w"], "each lane fills its own window");
  const first = sink.held.findIndex((h) => h.item.address === "w" && h.item.ref === "s1:0");
  sink.held.splice(first, 1)[0]!.done({ outcome: "ok" });
  await turn();
  const stats = group.stats();
  assert.equal(stats.wide!.sent, 1);
  assert.equal(stats.narrow!.sent, 0);
  assert.equal(stats.narrow!.in_flight, 1);
  assert.deepEqual(wide.moves, [1]);
  assert.equal(group.get("narrow"), group.get("narrow"), "found by name");
  const stopped = group.stop();
  for (const h of [...sink.held]) h.done({ outcome: "transient", error: "stopping" });
  await stopped;
  assert.deepEqual(group.names(), [], "every lane stopped and gone");
});

test("a lane group wakes the lanes a message's routes name for its consumer, opening one on demand when it is given a source", async () => {
  const sink = new HeldSink();
  const group = new LaneGroup(sink, silentLogger(), () => 60_000, { rejectWindowMs: Number.POSITIVE_INFINITY, idleRecheckMs: 60_000 });
  const source = (lane: string) =>
    new SnapshotSource(cursor(1), { kind: lane, address: lane, encode: () => [{ body: "{}", key: lane }], batch: 1, maxAhead: 2 });
  const routes = [
    { consumer: "mine", lane: "exec", address: "a" },
    { consumer: "other", lane: "theirs", address: "b" },
  ];
  group.wakeRoutes(routes, "mine");
  assert.deepEqual(group.names(), [], "no source given: a lane not open is not this group's");
  group.wakeRoutes(routes, "mine", source);
  await turn();
  assert.deepEqual(group.names(), ["exec"], "only the consumer's own route opens a lane");
  assert.deepEqual(
    sink.held.map((h) => h.item.address),
    ["exec"],
  );
  const stopped = group.stop();
  for (const h of [...sink.held]) h.done({ outcome: "transient", error: "stopping" });
  await stopped;
});
