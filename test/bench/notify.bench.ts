// The cost of one systemd notification: `systemd-notify` spawned by SystemdNotifier and
// delivered (with its barrier) to a real unix datagram socket, against spawning a process
// that does nothing (`true`), the floor of any spawn-based method.
import { execFile, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { BenchFn } from "./types.js";
import { SystemdNotifier } from "../../src/systemd/notify.js";
import { silentLogger } from "../../src/log.js";

const LISTENER = resolve(fileURLToPath(import.meta.url), "../../../../test/support/notify-listener.py");

const bench: BenchFn = async (ctx) => {
  const n = ctx.quick ? 20 : 200;
  const sock = join(ctx.dir, "notify.sock");
  const py = spawn("python3", [LISTENER, sock], { stdio: ["ignore", "pipe", "inherit"] });
  let received = 0;
  await new Promise<void>((ok) => {
    createInterface({ input: py.stdout! }).on("line", (l) => {
      if (l.includes("listening")) ok();
      else if (l.includes('"WATCHDOG"')) received++;
    });
  });
  try {
    const notifier = new SystemdNotifier(silentLogger(), { NOTIFY_SOCKET: sock, WATCHDOG_USEC: "30000000" });
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    for (let i = 0; i < n; i++) await notifier.send({ WATCHDOG: 1, STATUS: `bench ${i}` });
    const ms = (performance.now() - t0) / n;
    const cpu = process.cpuUsage(cpu0);
    if (notifier.stats.failed > 0) throw new Error(`${notifier.stats.failed} notifications failed`);
    const t1 = performance.now();
    for (let i = 0; i < n; i++) await new Promise((ok) => execFile("true", ok));
    const ref = (performance.now() - t1) / n;
    const cpuMs = (cpu.user + cpu.system) / 1000 / n;
    ctx.log(
      `${received}/${n} delivered; daemon-side CPU ${cpuMs.toFixed(2)} ms per message, ${((cpuMs / 15000) * 100).toFixed(3)}% of a core at one message per 15 s`,
    );
    return [
      {
        name: "systemd notification (systemd-notify + barrier)",
        value: ms,
        unit: "ms",
        reference: ref,
        ratio: ref / ms,
        note: "spawning `true` (lower is better)",
      },
    ];
  } finally {
    py.kill("SIGKILL");
  }
};
export default bench;
