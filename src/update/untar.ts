// Unpacks a release payload (a gzipped tar) into a fresh folder, trusting its entries for
// nothing but names and bytes, even though they are signed: only regular files and folders
// are made (no device, FIFO, symlink or hard link), no setuid/setgid file, modes lose group
// and world write, no name leaves the folder, and the bytes written stay within the
// manifest's unpacked_size. Files are created O_EXCL|O_NOFOLLOW, so nothing is written
// through a name that is already there.
import { closeSync, constants, fchmodSync, lstatSync, mkdirSync, openSync, writeSync } from "node:fs";
import { join } from "node:path";
import { BundleRefused } from "./bundle-format.js";

const BLOCK = 512;
/** What unpacked_size counts for each entry on top of its bytes: an inode and a folder block. */
export const ENTRY_COST = 4096;
/** Zeros (or anything) a tar may carry after its end marker: GNU tar pads to 10 KiB records. */
const MAX_TRAILER = 1 << 20;
const MAX_META = 64 * 1024;

const TYPE_NAMES: Record<string, string> = {
  "1": "a hard link",
  "2": "a symbolic link",
  "3": "a character device",
  "4": "a block device",
  "6": "a FIFO",
  "7": "a contiguous file",
  K: "a link",
};

/** What unpacked_size holds for a payload of these files and folders (the bundle builder and the unpack agree on it). */
export function unpackedSize(fileBytes: number, entries: number): number {
  return fileBytes + entries * ENTRY_COST;
}

/** A streaming tar reader that writes into `dir`; feed it the decompressed bytes in order. */
export class SafeUntar {
  private pending: Buffer = Buffer.alloc(0);
  /** the file being written, or the data being skipped or collected */
  private fd: number | null = null;
  private remaining = 0;
  private pad = 0;
  private meta: { kind: "L" | "x" | "g"; chunks: Buffer[] } | null = null;
  private nextPath: string | null = null;
  private nextSize: number | null = null;
  private ended = false;
  private trailer = 0;
  private used = 0;
  entries = 0;

  constructor(
    private readonly dir: string,
    private readonly limit: number,
  ) {}

  push(chunk: Buffer): void {
    let off = 0;
    while (off < chunk.length) {
      if (this.ended) {
        this.trailer += chunk.length - off;
        if (this.trailer > MAX_TRAILER) throw refused("the payload goes on after the end of its archive");
        return;
      }
      if (this.remaining > 0) {
        const n = Math.min(this.remaining, chunk.length - off);
        const part = chunk.subarray(off, off + n);
        if (this.fd !== null) {
          let w = 0;
          while (w < part.length) w += writeSync(this.fd, part, w);
        } else if (this.meta) {
          this.meta.chunks.push(Buffer.from(part));
        }
        this.remaining -= n;
        off += n;
        if (this.remaining === 0) this.endData();
        continue;
      }
      if (this.pad > 0) {
        const n = Math.min(this.pad, chunk.length - off);
        this.pad -= n;
        off += n;
        continue;
      }
      const need = BLOCK - this.pending.length;
      const take = chunk.subarray(off, off + need);
      off += take.length;
      this.pending = this.pending.length === 0 && take.length === BLOCK ? take : Buffer.concat([this.pending, take]);
      if (this.pending.length === BLOCK) {
        const h = this.pending;
        this.pending = Buffer.alloc(0);
        this.header(h);
      }
    }
  }

  /** Called at the end of the stream: refuses a payload cut short. */
  finish(): void {
    if (this.remaining > 0 || this.pending.length > 0 || this.meta || this.nextPath !== null)
      throw refused("the payload's archive is truncated");
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
  }

  /** Closes a file left open by a failure. */
  abort(): void {
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
  }

  private header(h: Buffer): void {
    if (h.every((b) => b === 0)) {
      this.ended = true;
      return;
    }
    checkChecksum(h);
    const type = String.fromCharCode(h[156] || 0x30);
    const headerSize = octal(h, 124, 12, "size");
    if (type === "L" || type === "x" || type === "g") {
      if (headerSize > MAX_META) throw refused(`a ${type} header of ${headerSize} bytes`);
      this.meta = { kind: type, chunks: [] };
      this.startData(headerSize, null);
      return;
    }
    const size = this.nextSize ?? headerSize;
    const rawMode = octal(h, 100, 8, "mode");
    const name = this.nextPath ?? headerName(h);
    this.nextPath = null;
    this.nextSize = null;
    this.entries++;
    const rel = safeRelative(name);
    if (type in TYPE_NAMES) throw refused(`${TYPE_NAMES[type]} (${name})`);
    if (type !== "0" && type !== "5") throw refused(`an entry of unknown type "${type}" (${name})`);
    if (rawMode & 0o6000) throw refused(`a setuid or setgid file (${name})`);
    this.used += type === "0" ? size + ENTRY_COST : ENTRY_COST;
    if (this.used > this.limit) throw refused(`more than its manifest's unpacked_size of ${this.limit} bytes`);
    if (type === "5") {
      if (size !== 0) throw refused(`a folder with data (${name})`);
      if (rel !== "") this.makeDir(rel);
      return;
    }
    if (rel === "") throw refused(`a file named "${name}"`);
    const slash = rel.lastIndexOf("/");
    if (slash > 0) this.makeDir(rel.slice(0, slash));
    const path = join(this.dir, rel);
    let fd: number;
    try {
      fd = openSync(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "EEXIST") throw refused(`${name} twice`);
      throw e;
    }
    // no group or world write; the owner can always read what it installed
    fchmodSync(fd, (rawMode & 0o755) | 0o400);
    this.startData(size, fd);
  }

  private startData(size: number, fd: number | null): void {
    this.remaining = size;
    this.pad = (BLOCK - (size % BLOCK)) % BLOCK;
    this.fd = fd;
    if (size === 0) this.endData();
  }

  private endData(): void {
    if (this.fd !== null) {
      closeSync(this.fd);
      this.fd = null;
    }
    const meta = this.meta;
    if (!meta) return;
    this.meta = null;
    const data = Buffer.concat(meta.chunks);
    if (meta.kind === "L") this.nextPath = data.toString("utf8").replace(/\0.*$/s, "");
    else if (meta.kind === "x") {
      const pax = parsePax(data);
      if (pax.path !== undefined) this.nextPath = pax.path;
      if (pax.size !== undefined) {
        if (!/^\d+$/.test(pax.size)) throw refused(`a pax size of "${pax.size}"`);
        this.nextSize = Number(pax.size);
      }
    }
  }

  private makeDir(rel: string): void {
    const path = join(this.dir, rel);
    try {
      const st = lstatSync(path);
      if (!st.isDirectory()) throw refused(`${rel} both as a file and as a folder`);
      return;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
    }
    mkdirSync(path, { recursive: true, mode: 0o755 });
  }
}

function refused(what: string): BundleRefused {
  return new BundleRefused(`refused: the payload holds ${what}`);
}

/** "./a/b" -> "a/b"; "." -> ""; refuses absolute names, "..", and NUL. */
function safeRelative(name: string): string {
  if (name.startsWith("/") || name.includes("\0")) throw refused(`the name "${name}"`);
  const parts = name.split("/").filter((p) => p !== "" && p !== ".");
  if (parts.includes("..")) throw refused(`the name "${name}"`);
  return parts.join("/");
}

function headerName(h: Buffer): string {
  const field = (start: number, len: number) => {
    const f = h.subarray(start, start + len);
    const end = f.indexOf(0);
    return f.subarray(0, end < 0 ? len : end).toString("utf8");
  };
  const name = field(0, 100);
  // ustar: a prefix holds the leading folders of a long name
  const magic = h.subarray(257, 262).toString("latin1");
  const prefix = magic === "ustar" ? field(345, 155) : "";
  return prefix ? `${prefix}/${name}` : name;
}

function octal(h: Buffer, start: number, len: number, what: string): number {
  const f = h.subarray(start, start + len);
  if (f.readUInt8(0) & 0x80) throw refused(`a base-256 ${what}`);
  const s = f.toString("latin1").replace(/\0.*$/s, "").trim();
  if (s === "") return 0;
  if (!/^[0-7]+$/.test(s)) throw refused(`a header whose ${what} is "${s}"`);
  return parseInt(s, 8);
}

function checkChecksum(h: Buffer): void {
  const want = octal(h, 148, 8, "checksum");
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : h.readUInt8(i);
  if (sum !== want) throw refused("a damaged tar header");
}

/** "27 path=some/long/name\n" records. */
function parsePax(data: Buffer): Record<string, string> {
  const out: Record<string, string> = {};
  let pos = 0;
  while (pos < data.length) {
    const sp = data.indexOf(0x20, pos);
    if (sp < 0) break;
    const len = Number(data.subarray(pos, sp).toString("latin1"));
    if (!Number.isInteger(len) || len <= sp - pos || pos + len > data.length) throw refused("a damaged pax header");
    const rec = data.subarray(sp + 1, pos + len - 1).toString("utf8");
    const eq = rec.indexOf("=");
    if (eq > 0) out[rec.slice(0, eq)] = rec.slice(eq + 1);
    pos += len;
  }
  return out;
}
