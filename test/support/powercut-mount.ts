// A power-cut filesystem (test/support/powercut-fs.py) mounted over a real directory:
// mountPowercut() mounts it, cut() unmounts it, which drops every write and name not
// fsynced: the backing directory then holds what a disk holds after the power went.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { setTimeout as sleep } from "node:timers/promises";

const ROOT = resolve(fileURLToPath(import.meta.url), "../../../..");
const SCRIPT = join(ROOT, "test/support/powercut-fs.py");
/** Debian's interpreter: python3-fusepy installs for it, not for another python3 on PATH. */
const PYTHON = "/usr/bin/python3";

/** What one mount dropped at its cut (the stats the filesystem writes at unmount). */
export interface CutStats {
  ops: number;
  fsyncs: number;
  dropped_writes: number;
  dropped_bytes: number;
  dropped_names: number;
}

export interface PowercutMount {
  backing: string;
  mountpoint: string;
  /** Unmounts (every process using the mount must be dead): unsynced writes are dropped. Once: a second call answers the same. */
  cut(): Promise<CutStats>;
}

/** Why this machine cannot run the harness (no /dev/fuse, no fusermount, no fusepy), or null. */
export function powercutUnavailable(): string | null {
  if (!existsSync("/dev/fuse")) return "/dev/fuse is missing";
  if (spawnSync("fusermount", ["-V"]).status !== 0) return "fusermount is missing (apt-get install fuse3)";
  if (spawnSync(PYTHON, ["-c", "import fusepy"]).status !== 0) return "fusepy is missing (apt-get install python3-fusepy)";
  return null;
}

function mounted(mountpoint: string): boolean {
  return readFileSync("/proc/self/mountinfo", "utf8")
    .split("\n")
    .some((l) => l.split(" ")[4] === mountpoint);
}

/**
 * Mounts the power-cut filesystem over `backing` at `mountpoint`; `work` holds its trash
 * (unlinked files kept until their directory is synced) and stats, on backing's filesystem.
 * keep: the unmount is a clean shutdown (nothing dropped), for setting a disk up.
 */
export async function mountPowercut(
  backing: string,
  mountpoint: string,
  work: string,
  opts: { keep?: boolean } = {},
): Promise<PowercutMount> {
  const trash = join(work, "trash");
  const statsFile = join(work, "stats.json");
  rmSync(trash, { recursive: true, force: true });
  rmSync(statsFile, { force: true });
  for (const d of [backing, mountpoint, trash]) mkdirSync(d, { recursive: true });
  const child: ChildProcess = spawn(
    PYTHON,
    [SCRIPT, backing, mountpoint, "--trash", trash, "--stats", statsFile, ...(opts.keep ? ["--keep-on-exit"] : [])],
    {
      stdio: ["ignore", "ignore", "pipe"],
    },
  );
  let stderr = "";
  child.stderr!.on("data", (b: Buffer) => (stderr = (stderr + b.toString()).slice(-4000)));
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  const end = Date.now() + 10_000;
  while (!mounted(mountpoint)) {
    if (child.exitCode !== null || Date.now() > end) {
      child.kill("SIGKILL");
      throw new Error(`powercut-fs did not mount ${mountpoint}: ${stderr}`);
    }
    await sleep(20); // wait: the mount appears in mountinfo once libfuse has mounted; no event tells us
  }
  let done: Promise<CutStats> | null = null;
  const unmount = async (): Promise<CutStats> => {
    // EBUSY while the kernel still tears down the killed processes' open files.
    for (let i = 0; ; i++) {
      const r = spawnSync("fusermount", ["-u", mountpoint], { encoding: "utf8" });
      if (r.status === 0) break;
      if (i >= 100) throw new Error(`fusermount -u ${mountpoint}: ${r.stderr}`);
      await sleep(50); // wait: the kernel releases a killed process's files shortly after its exit
    }
    await exited;
    if (child.exitCode !== 0) throw new Error(`powercut-fs exited with ${child.exitCode}: ${stderr}`);
    return JSON.parse(readFileSync(statsFile, "utf8")) as CutStats;
  };
  return { backing, mountpoint, cut: () => (done ??= unmount()) };
}
