// The systemd notification protocol end to end: `sitegate run` as a child process, started
// with the unit's node flags, NOTIFY_SOCKET pointing at a real unix datagram socket (a
// python listener standing in for systemd) and WATCHDOG_USEC set. Assertions are about
// the order of the messages the listener received, never about how long anything took.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { withTmpDir } from "../support/tmp.js";
import { testConfigInput } from "../support/config.js";
import { until } from "../support/wait.js";
import { unitCommand } from "../support/site50.js";
import { spawnDaemon, stopDaemon, writeConfig } from "../support/cli.js";
import { freePort } from "../support/net.js";

const LISTENER = resolve(fileURLToPath(import.meta.url), "../../../../test/support/notify-listener.py");
// Preloaded into the daemon: SIGUSR2 stalls its event loop for 3 s.
const LOOP_BLOCKER = resolve(fileURLToPath(import.meta.url), "../../support/loop-blocker.js");

type Msg = Record<string, string>;

interface Listener {
  messages: Msg[];
  /** Messages other than systemd-notify's BARRIER=1. */
  real(): Msg[];
  stop(): void;
}

async function startListener(path: string): Promise<Listener> {
  const py = spawn("python3", [LISTENER, path], { stdio: ["ignore", "pipe", "inherit"] });
  const messages: Msg[] = [];
  let listening = false;
  createInterface({ input: py.stdout! }).on("line", (line) => {
    const m = JSON.parse(line) as { listening?: string; fields?: Msg };
    if (m.listening) listening = true;
    if (m.fields) messages.push(m.fields);
  });
  await until(() => listening, "the notify listener to bind");
  return {
    messages,
    real: () => messages.filter((m) => !("BARRIER" in m)),
    stop: () => py.kill("SIGKILL"),
  };
}

async function startDaemon(dir: string, socket: string, watchdogUsec = 2_000_000): Promise<ChildProcess> {
  const base = testConfigInput(join(dir, "data"));
  const file = writeConfig(dir, { ...base, log_level: "warn", http: { ...base.http, listen: `127.0.0.1:${await freePort()}` } });
  const unit = unitCommand();
  return spawnDaemon(file, {
    nodeArgs: [...unit.nodeArgs, "--import", LOOP_BLOCKER],
    stdio: ["ignore", "ignore", "inherit"],
    env: { ...unit.env, NOTIFY_SOCKET: socket, WATCHDOG_USEC: String(watchdogUsec) },
  });
}

async function withNotifyDaemon(fn: (l: Listener, child: ChildProcess, dir: string) => Promise<void>): Promise<void> {
  await withTmpDir(async (dir) => {
    const listener = await startListener(join(dir, "notify.sock"));
    const child = await startDaemon(dir, join(dir, "notify.sock"));
    try {
      await fn(listener, child, dir);
    } finally {
      await stopDaemon(child);
      listener.stop();
    }
  });
}

const isPing = (m: Msg) => m.WATCHDOG === "1";
const indexAfter = (ms: Msg[], from: number, pred: (m: Msg) => boolean) => {
  for (let i = from; i < ms.length; i++) if (pred(ms[i])) return i;
  return -1;
};

test("READY=1 with a STATUS line, then WATCHDOG=1 pings, and STOPPING=1 last on SIGTERM", async () => {
  await withNotifyDaemon(async (l, child) => {
    await until(() => l.real().filter(isPing).length >= 2, "two watchdog pings", 30_000);
    child.kill("SIGTERM");
    const code = await new Promise((r) => child.once("exit", (c) => r(c)));
    assert.equal(code, 0);
    const ms = l.real();
    const ready = ms.findIndex((m) => m.READY === "1");
    assert.equal(ready, 0, `READY=1 comes first: ${JSON.stringify(ms)}`);
    assert.match(ms[ready].STATUS, /^0\/0 devices online, 0 events running, outbox 0, \d+ snapshots to push$/);
    assert.ok(ms.findIndex(isPing) > ready, "pings only after READY");
    assert.ok(
      ms.filter(isPing).every((m) => /devices online/.test(m.STATUS)),
      "each ping refreshes STATUS",
    );
    const stopping = ms.findIndex((m) => m.STOPPING === "1");
    assert.equal(stopping, ms.length - 1, `STOPPING=1 is the last message: ${JSON.stringify(ms.slice(-3))}`);
  });
});

test("no WATCHDOG=1 while the database cannot commit; pings resume once it can", async () => {
  await withNotifyDaemon(async (l, _child, dir) => {
    await until(() => l.real().some(isPing), "a first watchdog ping", 30_000);
    // Another connection holds the write lock, as a stuck writer or a full disk would.
    const other = new Database(join(dir, "data", "sitegate.db"));
    other.exec("BEGIN EXCLUSIVE");
    try {
      await until(
        () => l.real().some((m) => /watchdog withheld: .*database: SQLITE_BUSY/.test(m.STATUS ?? "")),
        "a withheld ping naming the database",
        30_000,
      );
      const first = l.real().findIndex((m) => /watchdog withheld/.test(m.STATUS ?? ""));
      await until(
        () =>
          l
            .real()
            .slice(first)
            .filter((m) => /watchdog withheld/.test(m.STATUS ?? "")).length >= 4,
        "four withheld ticks",
        30_000,
      );
      assert.equal(l.real().slice(first).filter(isPing).length, 0, "no WATCHDOG=1 while the database is locked");
    } finally {
      other.exec("ROLLBACK");
      other.close();
    }
    const released = l.real().length;
    await until(() => indexAfter(l.real(), released, isPing) >= 0, "pings to resume", 30_000);
  });
});

test("no WATCHDOG=1 while the event loop is blocked; the stall is reported, then pings resume", async () => {
  await withNotifyDaemon(async (l, child) => {
    await until(() => l.real().some(isPing), "a first watchdog ping", 30_000);
    child.kill("SIGUSR2");
    await until(() => l.real().some((m) => /^test: blocking the event loop/.test(m.STATUS ?? "")), "the loop blocker to start", 30_000);
    const blocked = l.real().findIndex((m) => /^test: blocking/.test(m.STATUS ?? ""));
    await until(
      () => indexAfter(l.real(), blocked, (m) => /watchdog withheld: event loop stalled \d+ ms/.test(m.STATUS ?? "")) >= 0,
      "the stall to be reported",
      30_000,
    );
    const reported = indexAfter(l.real(), blocked, (m) => /event loop stalled/.test(m.STATUS ?? ""));
    assert.equal(l.real().slice(blocked, reported).filter(isPing).length, 0, "no WATCHDOG=1 between the block and the stall report");
    await until(() => indexAfter(l.real(), reported, isPing) >= 0, "pings to resume", 30_000);
  });
});
