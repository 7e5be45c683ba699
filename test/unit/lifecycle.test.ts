import { test } from "node:test";
import assert from "node:assert/strict";
import { Lifecycle, type Part } from "../../src/lifecycle.js";
import { silentLogger } from "../../src/log.js";

function recorder(events: string[], name: string, opts: { failStart?: boolean; failStop?: boolean; hangStop?: boolean } = {}): Part {
  return {
    name,
    async start() {
      if (opts.failStart) throw new Error(`${name} cannot start`);
      events.push(`start ${name}`);
    },
    async stop() {
      if (opts.hangStop) await new Promise(() => {});
      if (opts.failStop) throw new Error(`${name} cannot stop`);
      events.push(`stop ${name}`);
    },
  };
}

test("parts start in order and stop in reverse", async () => {
  const events: string[] = [];
  const life = new Lifecycle(silentLogger());
  for (const n of ["db", "bus", "api"]) life.add(recorder(events, n));
  await life.start();
  await life.stop();
  assert.deepEqual(events, ["start db", "start bus", "start api", "stop api", "stop bus", "stop db"]);
});

test("a part that fails to start stops the ones already started and rethrows", async () => {
  const events: string[] = [];
  const life = new Lifecycle(silentLogger());
  life.add(recorder(events, "db"));
  life.add(recorder(events, "bus", { failStart: true }));
  life.add(recorder(events, "api"));
  await assert.rejects(life.start(), /bus cannot start/);
  assert.deepEqual(events, ["start db", "stop db"]);
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
