import { test } from "node:test";
import assert from "node:assert/strict";
import { Lifecycle, type MetricFamily, type Part } from "../../src/lifecycle.js";
import { silentLogger } from "../../src/log.js";
import { FakeClock } from "../support/fake-clock.js";

// Every wait below is on a FakeClock the test moves: the retry delays and the stop budgets
// are checked to the millisecond, and machine load cannot move them.

interface Opts {
  /** Starts that fail before one succeeds (Infinity: never starts). */
  failStarts?: number;
  failStop?: boolean;
  hangStop?: boolean;
  /** Start attempt n (1, 2, ...) waits for the promise returned, when there is one. */
  hold?: (attempt: number) => Promise<void> | undefined;
  metrics?: () => MetricFamily[];
}

function recorder(events: string[], name: string, opts: Opts = {}, clock?: FakeClock): Part & { attempts: number[] } {
  let failures = 0;
  return {
    name,
    attempts: [],
    async start() {
      this.attempts.push(clock?.mono() ?? 0);
      await opts.hold?.(this.attempts.length);
      if (failures < (opts.failStarts ?? 0)) {
        failures++;
        events.push(`failed ${name}`);
        throw new Error(`${name} cannot start`);
      }
      events.push(`start ${name}`);
    },
    async stop() {
      if (opts.hangStop) await new Promise(() => {});
      if (opts.failStop) throw new Error(`${name} cannot stop`);
      events.push(`stop ${name}`);
    },
    ...(opts.metrics ? { metrics: opts.metrics } : {}),
  };
}

const fast = { firstMs: 20, maxMs: 80 };
const up = (life: Lifecycle) =>
  Object.fromEntries(
    life
      .metrics()
      .find((f) => f.name === "sitegate_part_up")!
      .values.map((v) => [v.labels!.part, v.value]),
  );

/** One turn of the event loop: every promise the parts and the lifecycle chain has settled. */
const turn = () => new Promise<void>((r) => setImmediate(r));

function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((r) => (open = r));
  return { promise, open };
}

/** Moves the clock to each delay in turn and checks an attempt comes exactly then, not a millisecond before. */
async function expectAttemptsAfter(clock: FakeClock, part: { attempts: number[] }, delays: number[]): Promise<void> {
  for (const delay of delays) {
    const n = part.attempts.length;
    clock.advance(delay - 1);
    await turn();
    assert.equal(part.attempts.length, n, `no attempt ${delay - 1} ms after the last`);
    clock.advance(1);
    await turn();
    assert.equal(part.attempts.length, n + 1, `an attempt ${delay} ms after the last`);
  }
}

test("parts start in order and stop in reverse", async () => {
  const events: string[] = [];
  const life = new Lifecycle(silentLogger());
  for (const n of ["db", "bus", "api"]) life.add(recorder(events, n));
  await life.start();
  await life.stop();
  assert.deepEqual(events, ["start db", "start bus", "start api", "stop api", "stop bus", "stop db"]);
});

test("an essential part that fails to start stops the ones already started, is stopped itself, and fails the start", async () => {
  const events: string[] = [];
  const clock = new FakeClock(0);
  const life = new Lifecycle(silentLogger(), fast, clock);
  life.add(recorder(events, "db"));
  life.add(recorder(events, "api", { failStarts: Infinity }), { essential: true });
  life.add(recorder(events, "ui"));
  await assert.rejects(life.start(), /api cannot start/);
  assert.equal(clock.pending, 0, "no retry is pending");
  clock.advance(10 * fast.maxMs);
  await turn();
  assert.deepEqual(events, ["start db", "failed api", "stop api", "stop db"], "released, not retried, ui never started");
});

test("a part that is not essential and fails to start is reported, retried with growing delays, and the others run", async () => {
  const events: string[] = [];
  const clock = new FakeClock(0);
  const life = new Lifecycle(silentLogger(), fast, clock);
  life.add(recorder(events, "db"), { essential: true });
  const flaky = life.add(recorder(events, "zigbee", { failStarts: 3 }, clock));
  life.add(recorder(events, "api"), { essential: true });
  await life.start();
  assert.deepEqual(events, ["start db", "failed zigbee", "stop zigbee", "start api"]);
  assert.deepEqual(up(life), { db: 1, zigbee: 0, api: 1 });
  assert.deepEqual(
    life.warnings().map((w) => w.code),
    ["part_not_running"],
  );
  assert.match(life.warnings()[0].message, /^zigbee is not running after 1 failed start \(zigbee cannot start\); retrying$/);

  await expectAttemptsAfter(clock, flaky, [20, 40, 80]);
  assert.deepEqual(flaky.attempts, [0, 20, 60, 140]);
  assert.ok(events.includes("start zigbee"));
  assert.deepEqual(up(life), { db: 1, zigbee: 1, api: 1 });
  assert.deepEqual(life.warnings(), []);
  const failures = life.metrics().find((f) => f.name === "sitegate_part_start_failures_total")!;
  assert.deepEqual(failures.values.find((v) => v.labels!.part === "zigbee")?.value, 3);
  await life.stop();
  assert.deepEqual(events.slice(-3), ["stop api", "stop zigbee", "stop db"], "stopped in list order reversed, not in start order");
});

test("the retry delay stops growing at maxMs", async () => {
  const events: string[] = [];
  const clock = new FakeClock(0);
  const life = new Lifecycle(silentLogger(), { firstMs: 5, maxMs: 15 }, clock);
  const p = life.add(recorder(events, "gpio", { failStarts: 6 }, clock));
  await life.start();
  await expectAttemptsAfter(clock, p, [5, 10, 15, 15, 15, 15]);
  assert.ok(events.includes("start gpio"));
  assert.equal(clock.pending, 0, "no retry after the start that worked");
  await life.stop();
});

test("stop() cancels a pending retry; nothing starts afterwards", async () => {
  const events: string[] = [];
  const clock = new FakeClock(0);
  const life = new Lifecycle(silentLogger(), { firstMs: 30, maxMs: 30 }, clock);
  const p = life.add(recorder(events, "fleet", { failStarts: Infinity }));
  await life.start();
  assert.equal(clock.pending, 1, "a retry is pending");
  await life.stop();
  assert.equal(clock.pending, 0, "the retry was cancelled");
  clock.advance(10 * 30);
  await turn();
  assert.equal(p.attempts.length, 1);
  assert.deepEqual(events, ["failed fleet", "stop fleet"]);
});

test("stop() during a retry waits for that attempt and stops the part it started", async () => {
  const events: string[] = [];
  const clock = new FakeClock(0);
  const life = new Lifecycle(silentLogger(), { firstMs: 10, maxMs: 10 }, clock);
  const second = gate();
  const p = life.add(recorder(events, "ui", { failStarts: 1, hold: (n) => (n === 2 ? second.promise : undefined) }));
  await life.start();
  clock.advance(10);
  await turn();
  assert.equal(p.attempts.length, 2, "the retry is in flight");
  const stopping = life.stop();
  await turn();
  assert.deepEqual(events, ["failed ui", "stop ui"], "the stop waits for the attempt");
  second.open();
  await turn();
  assert.deepEqual(events, ["failed ui", "stop ui", "start ui", "stop ui"]);
  await stopping;
});

test("stop() during the start waits for the part being started, stops it, and starts no other", async () => {
  const events: string[] = [];
  const life = new Lifecycle(silentLogger(), fast, new FakeClock(0));
  const slowStart = gate();
  life.add(recorder(events, "db"));
  const slow = life.add(recorder(events, "slow", { hold: () => slowStart.promise }));
  life.add(recorder(events, "api"));
  const starting = life.start();
  await turn();
  assert.equal(slow.attempts.length, 1, "slow is starting");
  const stopping = life.stop();
  slowStart.open();
  await stopping;
  await starting;
  assert.deepEqual(events, ["start db", "start slow", "stop slow", "stop db"]);
});

test("stop() does not wait for ever for a start that hangs", async () => {
  const events: string[] = [];
  const clock = new FakeClock(0);
  const life = new Lifecycle(silentLogger(), fast, clock);
  let stuckStarting = false;
  life.add(recorder(events, "db"));
  life.add({
    name: "stuck",
    start: () => {
      stuckStarting = true;
      return new Promise<void>(() => {});
    },
    stop() {},
  });
  void life.start();
  await turn();
  assert.ok(stuckStarting);
  let stopped = false;
  const stopping = life.stop(60).then(() => (stopped = true));
  await turn();
  assert.equal(stopped, false, "the stop waits for the start in flight");
  clock.advance(10);
  await turn();
  assert.equal(stopped, true, "and gives up on it after its share of the budget (a sixth of 60 ms)");
  await stopping;
  assert.deepEqual(events, ["start db", "stop db"]);
});

test("/metrics is the union of the parts' metrics(); one that throws is left out", async () => {
  const life = new Lifecycle(silentLogger());
  const fam = (name: string): MetricFamily => ({ name, help: name, type: "counter", values: [{ value: 1 }] });
  life.add(recorder([], "a", { metrics: () => [fam("a_total")] }));
  life.add(
    recorder([], "b", {
      metrics: () => {
        throw new Error("broken");
      },
    }),
  );
  life.add(recorder([], "c", { metrics: () => [fam("c_total")] }));
  await life.start();
  assert.deepEqual(
    life.metrics().map((f) => f.name),
    ["sitegate_part_up", "sitegate_part_start_failures_total", "a_total", "c_total"],
  );
  await life.stop();
});

test("a part that fails or hangs on stop does not keep the others from stopping", async () => {
  const events: string[] = [];
  const clock = new FakeClock(0);
  const life = new Lifecycle(silentLogger(), fast, clock);
  life.add(recorder(events, "db"));
  life.add(recorder(events, "hang", { hangStop: true }));
  life.add(recorder(events, "bad", { failStop: true }));
  await life.start();
  const stopping = life.stop(50);
  await turn();
  clock.advance(50);
  await turn();
  assert.deepEqual(events, ["start db", "start hang", "start bad", "stop db"]);
  await stopping;
});

test("stop is idempotent", async () => {
  const events: string[] = [];
  const life = new Lifecycle(silentLogger());
  life.add(recorder(events, "db"));
  await life.start();
  await Promise.all([life.stop(), life.stop()]);
  await life.stop();
  assert.deepEqual(events, ["start db", "stop db"]);
});

test("two parts with one name are refused", () => {
  const life = new Lifecycle(silentLogger());
  life.add(recorder([], "db"));
  assert.throws(() => life.add(recorder([], "db")), /two parts named db/);
});

test("the parts share one stop budget: each is told what is left, and a hung part leaves the later ones nothing to wait for", async () => {
  const told: Array<[string, number | undefined]> = [];
  const part = (name: string, hang: boolean): Part => ({
    name,
    start() {},
    stop(budgetMs?: number) {
      told.push([name, budgetMs]);
      return hang ? new Promise<void>(() => {}) : undefined;
    },
  });
  const clock = new FakeClock(0);
  const life = new Lifecycle(silentLogger(), fast, clock);
  life.add(part("storage", false));
  life.add(part("dispatch", true));
  life.add(part("api", false));
  await life.start();
  const stopping = life.stop(200);
  await turn();
  clock.advance(200);
  await turn();
  // Reverse order; api stops at once (the whole budget left), dispatch hangs through all of it.
  assert.deepEqual(told, [
    ["api", 200],
    ["dispatch", 200],
    ["storage", 0],
  ]);
  await stopping;
});

test("a start that hangs takes only its share of the stop budget: the running parts still get the rest", async () => {
  const told: Array<[string, number | undefined]> = [];
  const clock = new FakeClock(0);
  const life = new Lifecycle(silentLogger(), fast, clock);
  let stuckStarting = false;
  life.add({ name: "dispatch", start() {}, stop: (budgetMs?: number) => void told.push(["dispatch", budgetMs]) });
  life.add({
    name: "stuck",
    start: () => {
      stuckStarting = true;
      return new Promise<void>(() => {});
    },
    stop() {},
  });
  void life.start();
  await turn();
  assert.ok(stuckStarting);
  const stopping = life.stop(600);
  await turn();
  clock.advance(100);
  await turn();
  // 600 ms budget, a sixth (100 ms) spent waiting for the hung start; waiting for it as
  // long as the budget allowed would leave dispatch 0 ms.
  assert.deepEqual(told, [["dispatch", 500]]);
  await stopping;
});
