import { test } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { Lifecycle, type MetricFamily, type Part } from "../../src/lifecycle.js";
import { silentLogger } from "../../src/log.js";

interface Opts {
  /** Starts that fail before one succeeds (Infinity: never starts). */
  failStarts?: number;
  failStop?: boolean;
  hangStop?: boolean;
  startMs?: number;
  metrics?: () => MetricFamily[];
}

function recorder(events: string[], name: string, opts: Opts = {}): Part & { attempts: number[] } {
  let failures = 0;
  return {
    name,
    attempts: [],
    async start() {
      this.attempts.push(performance.now());
      if (opts.startMs) await sleep(opts.startMs);
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

async function until(cond: () => boolean, ms = 2000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error("timed out");
    await sleep(5);
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
  const life = new Lifecycle(silentLogger(), fast);
  life.add(recorder(events, "db"));
  life.add(recorder(events, "api", { failStarts: Infinity }), { essential: true });
  life.add(recorder(events, "ui"));
  await assert.rejects(life.start(), /api cannot start/);
  await sleep(3 * fast.firstMs);
  assert.deepEqual(events, ["start db", "failed api", "stop api", "stop db"], "released, not retried, ui never started");
});

test("a part that is not essential and fails to start is reported, retried with growing delays, and the others run", async () => {
  const events: string[] = [];
  const life = new Lifecycle(silentLogger(), fast);
  life.add(recorder(events, "db"), { essential: true });
  const flaky = life.add(recorder(events, "zigbee", { failStarts: 3 }));
  life.add(recorder(events, "api"), { essential: true });
  await life.start();
  assert.deepEqual(events, ["start db", "failed zigbee", "stop zigbee", "start api"]);
  assert.deepEqual(up(life), { db: 1, zigbee: 0, api: 1 });
  assert.deepEqual(
    life.warnings().map((w) => w.code),
    ["part_not_running"],
  );
  assert.match(life.warnings()[0].message, /^zigbee is not running after 1 failed start \(zigbee cannot start\); retrying$/);

  await until(() => events.includes("start zigbee"));
  const gaps = flaky.attempts.slice(1).map((t, i) => t - flaky.attempts[i]);
  assert.equal(gaps.length, 3);
  // 20, 40, 80 ms (timers never fire early; allow a millisecond of rounding)
  gaps.forEach((g, i) => assert.ok(g >= fast.firstMs * 2 ** i - 1, `gap ${i} is ${g} ms`));
  assert.deepEqual(up(life), { db: 1, zigbee: 1, api: 1 });
  assert.deepEqual(life.warnings(), []);
  const failures = life.metrics().find((f) => f.name === "sitegate_part_start_failures_total")!;
  assert.deepEqual(failures.values.find((v) => v.labels!.part === "zigbee")?.value, 3);
  await life.stop();
  assert.deepEqual(events.slice(-3), ["stop api", "stop zigbee", "stop db"], "stopped in list order reversed, not in start order");
});

test("the retry delay stops growing at maxMs", async () => {
  const events: string[] = [];
  const life = new Lifecycle(silentLogger(), { firstMs: 5, maxMs: 15 });
  const p = life.add(recorder(events, "gpio", { failStarts: 6 }));
  await life.start();
  await until(() => events.includes("start gpio"));
  const gaps = p.attempts.slice(1).map((t, i) => t - p.attempts[i]);
  assert.ok(
    gaps.slice(2).every((g) => g >= 14 && g < 200),
    `gaps ${gaps.join(", ")}`,
  );
  await life.stop();
});

test("stop() cancels a pending retry; nothing starts afterwards", async () => {
  const events: string[] = [];
  const life = new Lifecycle(silentLogger(), { firstMs: 30, maxMs: 30 });
  const p = life.add(recorder(events, "fleet", { failStarts: Infinity }));
  await life.start();
  await life.stop();
  await sleep(100);
  assert.equal(p.attempts.length, 1);
  assert.deepEqual(events, ["failed fleet", "stop fleet"]);
});

test("stop() during a retry waits for that attempt and stops the part it started", async () => {
  const events: string[] = [];
  const life = new Lifecycle(silentLogger(), { firstMs: 10, maxMs: 10 });
  const p = life.add(recorder(events, "ui", { failStarts: 1, startMs: 30 }));
  await life.start();
  await until(() => p.attempts.length === 2);
  await life.stop();
  assert.deepEqual(events, ["failed ui", "stop ui", "start ui", "stop ui"]);
});

test("stop() during the start waits for the part being started, stops it, and starts no other", async () => {
  const events: string[] = [];
  const life = new Lifecycle(silentLogger());
  life.add(recorder(events, "db"));
  life.add(recorder(events, "slow", { startMs: 30 }));
  life.add(recorder(events, "api"));
  const starting = life.start();
  await sleep(10);
  await life.stop();
  await starting;
  assert.deepEqual(events, ["start db", "start slow", "stop slow", "stop db"]);
});

test("stop() does not wait for ever for a start that hangs", async () => {
  const events: string[] = [];
  const life = new Lifecycle(silentLogger());
  life.add(recorder(events, "db"));
  life.add({ name: "stuck", start: () => new Promise<void>(() => {}), stop() {} });
  void life.start();
  await sleep(10);
  const t0 = performance.now();
  await life.stop(50);
  assert.ok(performance.now() - t0 < 1000);
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
  const life = new Lifecycle(silentLogger());
  life.add(recorder(events, "db"));
  life.add(recorder(events, "hang", { hangStop: true }));
  life.add(recorder(events, "bad", { failStop: true }));
  await life.start();
  await life.stop(50);
  assert.deepEqual(events, ["start db", "start hang", "start bad", "stop db"]);
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
  const life = new Lifecycle(silentLogger());
  life.add(part("storage", false));
  life.add(part("dispatch", true));
  life.add(part("api", false));
  await life.start();
  await life.stop(200);
  // Reverse order; api stops at once (about the whole budget left), dispatch hangs through the rest of it.
  assert.deepEqual(
    told.map(([n]) => n),
    ["api", "dispatch", "storage"],
  );
  assert.ok(told[0][1]! > 0 && told[0][1]! <= 200, `api told ${told[0][1]} ms`);
  assert.ok(told[1][1]! > 0 && told[1][1]! <= told[0][1]!, `dispatch gets what api left: ${told[1][1]} ms`);
  assert.equal(told[2][1], 0, "storage: nothing left after the hung part (its synchronous stop still runs)");
});

test("a start that hangs takes only its share of the stop budget: the running parts still get the rest", async () => {
  const told: Array<[string, number | undefined]> = [];
  const life = new Lifecycle(silentLogger());
  life.add({ name: "dispatch", start() {}, stop: (budgetMs?: number) => void told.push(["dispatch", budgetMs]) });
  life.add({ name: "stuck", start: () => new Promise<void>(() => {}), stop() {} });
  void life.start();
  await sleep(10);
  await life.stop(600);
  assert.equal(told.length, 1);
  // 600 ms budget, at most a sixth (100 ms) spent waiting for the hung start; waiting
  // for it as long as the budget allowed would leave dispatch 0 ms.
  assert.ok(told[0][1]! > 0, `dispatch told ${told[0][1]} ms`);
});
