// Crash-safe file operations for the updater: every change is a temp name, fsync, rename,
// and an fsync of the directory that holds the new name, so a power cut leaves either the
// old or the new state on the SD card, never a half-written one.
import {
  closeSync,
  fchmodSync,
  fsyncSync,
  lstatSync,
  openSync,
  readdirSync,
  readlinkSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeSync,
} from "node:fs";
import { basename, dirname, join } from "node:path";
import { randomBytes } from "node:crypto";

export function fsyncPath(path: string): void {
  const fd = openSync(path, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Writes `data` to a temp file beside `path`, fsyncs it, renames it over `path`, fsyncs the directory. */
export function writeFileAtomic(path: string, data: string | Buffer, mode = 0o644): void {
  const tmp = join(dirname(path), `.${basename(path)}.tmp-${randomBytes(4).toString("hex")}`);
  const fd = openSync(tmp, "w", mode);
  try {
    fchmodSync(fd, mode); // the mode asked for, whatever the umask (the root units run with 0077)
    const buf = typeof data === "string" ? Buffer.from(data) : data;
    let off = 0;
    while (off < buf.length) off += writeSync(fd, buf, off);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, path);
  fsyncPath(dirname(path));
}

/** Points the symlink `link` at `target` atomically (symlink under a temp name, rename over). */
export function symlinkAtomic(target: string, link: string): void {
  const tmp = join(dirname(link), `.${basename(link)}.tmp-${randomBytes(4).toString("hex")}`);
  symlinkSync(target, tmp);
  renameSync(tmp, link);
  fsyncPath(dirname(link));
}

/** The target of a symlink, or null when there is none. */
export function readLinkOrNull(link: string): string | null {
  try {
    return readlinkSync(link);
  } catch {
    return null;
  }
}

/** fsyncs every regular file and directory under `root` (children before parents). */
export function fsyncTree(root: string): void {
  for (const e of readdirSync(root, { withFileTypes: true })) {
    const p = join(root, e.name);
    if (e.isDirectory()) fsyncTree(p);
    else if (e.isFile()) fsyncPath(p);
  }
  fsyncPath(root);
}

export function exists(path: string): boolean {
  try {
    lstatSync(path);
    return true;
  } catch {
    return false;
  }
}

export function removeTree(path: string): void {
  rmSync(path, { recursive: true, force: true });
}
