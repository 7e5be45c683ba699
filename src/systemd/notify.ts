// The sd_notify protocol (READY=1, STATUS=, WATCHDOG=1, STOPPING=1) to $NOTIFY_SOCKET.
// Node.js has no unix datagram sockets, so each message is handed to `systemd-notify`,
// which ships with systemd (the unit sets NotifyAccess=all, since the sender is a child
// process). Since systemd 246 systemd-notify waits until the manager has read the
// message (a barrier), so a message is never lost to the child exiting first.
// Messages go out one at a time, in order; a watchdog ping that would queue behind
// another ping is dropped (the next one is as good). Without NOTIFY_SOCKET every call
// is a no-op, so `sitegate run` behaves the same outside systemd.
import { execFile } from "node:child_process";
import type { Logger } from "../log.js";

export interface NotifyStats {
  sent: number;
  failed: number;
  /** Wall time of the last systemd-notify run (spawn to exit), ms. */
  last_ms: number;
  total_ms: number;
}

export class SystemdNotifier {
  readonly enabled: boolean;
  /** WATCHDOG_USEC in ms when the watchdog is on for this process, else 0. */
  readonly watchdogMs: number;
  readonly stats: NotifyStats = { sent: 0, failed: 0, last_ms: 0, total_ms: 0 };
  private chain: Promise<void> = Promise.resolve();
  private queued = 0;
  private pingQueued = false;
  private readonly socket: string;

  constructor(
    private readonly log: Logger,
    env: NodeJS.ProcessEnv = process.env,
    private readonly command = env.SITEGATE_SYSTEMD_NOTIFY ?? "systemd-notify",
  ) {
    this.socket = env.NOTIFY_SOCKET ?? "";
    this.enabled = this.socket !== "";
    const usec = Number(env.WATCHDOG_USEC ?? 0);
    // WATCHDOG_PID, when set, names the process the watchdog is meant for.
    const forUs = !env.WATCHDOG_PID || Number(env.WATCHDOG_PID) === process.pid;
    this.watchdogMs = this.enabled && forUs && usec > 0 ? Math.floor(usec / 1000) : 0;
  }

  /** Sends one message (several KEY=VALUE fields); resolves when it was delivered or failed. */
  send(fields: Record<string, string | number>): Promise<void> {
    if (!this.enabled) return Promise.resolve();
    const isPing = "WATCHDOG" in fields && Object.keys(fields).length <= 2;
    if (isPing && this.pingQueued) return this.chain;
    if (isPing) this.pingQueued = true;
    // One line per field; a newline inside STATUS would start another field.
    const args = Object.entries(fields).map(([k, v]) => `${k}=${String(v).replace(/\n/g, " ")}`);
    this.queued++;
    this.chain = this.chain.then(() => {
      if (isPing) this.pingQueued = false;
      return this.run(args);
    });
    return this.chain;
  }

  /** Messages handed over and not yet delivered. */
  get pending(): number {
    return this.queued;
  }

  private run(args: string[]): Promise<void> {
    const started = performance.now();
    return new Promise((resolve) => {
      execFile(this.command, args, { timeout: 5000, env: { ...process.env, NOTIFY_SOCKET: this.socket } }, (err, _stdout, stderr) => {
        const ms = performance.now() - started;
        this.queued--;
        this.stats.last_ms = ms;
        this.stats.total_ms += ms;
        if (err) {
          this.stats.failed++;
          this.log.warn(
            { err: err.message, stderr: String(stderr).trim(), fields: args.map((a) => a.split("=")[0]) },
            "systemd notification failed",
          );
        } else {
          this.stats.sent++;
        }
        resolve();
      });
    });
  }
}
