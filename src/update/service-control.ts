// The service the releases run as: restarting it, and whether an installer is still alive.
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { SitegateError } from "../errors.js";

export type Say = (line: string) => void;

export interface ServiceControl {
  /** shell command that restarts the service; "" skips it */
  restartCmd: string;
}

export function restart(ctl: ServiceControl, say: Say): void {
  if (ctl.restartCmd.trim() === "") {
    say("restart skipped (no restart command)");
    return;
  }
  const r = spawnSync("/bin/sh", ["-c", ctl.restartCmd], { stdio: "inherit" });
  if (r.status !== 0) throw new SitegateError("UPDATE_FAILED", `restart command failed (exit ${r.status}): ${ctl.restartCmd}`);
}

export function bootId(): string {
  try {
    return readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim();
  } catch {
    return "";
  }
}

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}
