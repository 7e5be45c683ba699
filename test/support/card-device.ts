// A card of its own for a measurement: a small ext4 file system (4 KiB blocks, with its
// journal, as Raspberry Pi OS formats a card; mounted noatime) on a loop device over a file
// in /dev/shm. What the file system sends to the card is read from the loop device's
// /sys/block/<dev>/stat: data, file-system metadata and the journal alike, and nothing any
// other process on this machine writes. /proc/PID/io write_bytes counts the pages a
// process dirties instead: metadata pages another process had dirtied already are not
// charged to it, and the journal is charged to no process, so on a busy machine it moves
// with what else runs.
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";

export interface CardDevice {
  /** The mounted file system (empty but for lost+found). */
  dir: string;
  /** The loop device, as /dev/loopN. */
  device: string;
  /** Bytes the file system has sent to the device since the mount. */
  written(): number;
  /** Sends what the file system holds dirty to the device (syncfs), so that a window's end counts it. */
  sync(): void;
  /** Unmounts, frees the loop device and deletes the image. */
  close(): void;
}

/** Why this machine cannot mount a card for a measurement (not root, no loop device, no mkfs.ext4), or null. */
export function cardUnavailable(): string | null {
  if (process.getuid?.() !== 0) return "not root (a loop mount needs it)";
  if (!existsSync("/dev/loop-control")) return "no /dev/loop-control";
  for (const tool of ["mkfs.ext4", "mount", "umount", "findmnt"])
    if (spawnSync("sh", ["-c", `command -v ${tool}`]).status !== 0) return `${tool} is missing`;
  return null;
}

/** Sectors written of /sys/block/<dev>/stat (the 7th field), in bytes. */
function sectorsWritten(device: string): number {
  const f = readFileSync(`/sys/block/${basename(device)}/stat`, "utf8")
    .trim()
    .split(/\s+/);
  return Number(f[6]) * 512;
}

/**
 * Makes, formats and mounts a card of `mib` MiB, with mount options `options` (Raspberry Pi
 * OS mounts its root noatime). Throws if it cannot (see cardUnavailable).
 */
export function mountCard(mib = 256, options = "noatime"): CardDevice {
  const base = existsSync("/dev/shm") ? "/dev/shm" : tmpdir();
  const work = mkdtempSync(join(base, "sitegate-card-"));
  const image = join(work, "card.img");
  const dir = join(work, "mnt");
  mkdirSync(dir);
  let mountedAt: string | null = null;
  try {
    execFileSync("truncate", ["-s", `${mib}M`, image]);
    // Inode tables and the journal initialised now, not by ext4lazyinit in the background
    // while a window counts.
    execFileSync("mkfs.ext4", ["-q", "-F", "-b", "4096", "-E", "lazy_itable_init=0,lazy_journal_init=0", image], { stdio: "pipe" });
    execFileSync("mount", ["-o", `loop,${options}`, image, dir], { stdio: "pipe" });
    mountedAt = dir;
    const device = execFileSync("findmnt", ["-n", "-o", "SOURCE", "--mountpoint", dir], { encoding: "utf8" }).trim();
    if (!/^\/dev\/loop\d+$/.test(device)) throw new Error(`${dir} is mounted from ${device}, not a loop device`);
    const start = sectorsWritten(device);
    return {
      dir,
      device,
      written: () => sectorsWritten(device) - start,
      sync: () => void execFileSync("sync", ["-f", dir]),
      close: () => {
        spawnSync("umount", [dir]);
        rmSync(work, { recursive: true, force: true });
      },
    };
  } catch (e) {
    if (mountedAt) spawnSync("umount", [mountedAt]);
    rmSync(work, { recursive: true, force: true });
    throw e;
  }
}
