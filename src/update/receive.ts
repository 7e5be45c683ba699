// Takes a bundle in before any check is made on it. The bundle file is opened once (O_NOFOLLOW,
// a regular file), or downloaded over https, and copied into a folder only root can enter
// (<root>/.incoming-<pid>-XXXXXX, 0700; the copy 0600, O_EXCL|O_NOFOLLOW); its payload is
// hashed on the way. The signature, the manifest and the unpack then read only that copy:
// whoever can write the folder the bundle came from cannot swap it between the checks and
// the unpack, and a download can neither grow without bound nor be redirected off https.
import { createHash, type Hash } from "node:crypto";
import {
  closeSync,
  constants,
  fstatSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readSync,
  rmSync,
  statfsSync,
  writeSync,
} from "node:fs";
import type { IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import { join } from "node:path";
import { BundleRefused, MAX_HEADER, parseHeader, type BundleHeader } from "./bundle-format.js";
import { updateUrlRefusal } from "./request.js";
import { SitegateError } from "../errors.js";

/** The largest bundle taken in by default (a release is a few tens of MiB). */
export const DEFAULT_MAX_BUNDLE_BYTES = 256 * 1024 * 1024;
const MAX_REDIRECTS = 5;
/** Free space kept on the download's file system on top of the bundle. */
const DOWNLOAD_HEADROOM = 16 * 1024 * 1024;
const DOWNLOAD_TIMEOUT_MS = 15 * 60_000;

export interface ReceivedBundle extends BundleHeader {
  /** the private copy: the only file read from here on */
  file: string;
  payloadSize: number;
  payloadSha256: string;
}

/** A private copy being written: the header is parsed and the payload hashed as bytes arrive. */
export class Incoming {
  readonly dir: string;
  readonly file: string;
  private fd: number | null;
  private head: Buffer = Buffer.alloc(0);
  private header: BundleHeader | null = null;
  private readonly hash: Hash = createHash("sha256");
  private size = 0;

  /** `name` is what messages call the bundle; `maxBytes` caps the copy. */
  constructor(
    root: string,
    private readonly name: string,
    private readonly maxBytes: number,
  ) {
    mkdirSync(root, { recursive: true, mode: 0o755 });
    this.dir = mkdtempSync(join(root, `.incoming-${process.pid}-`)); // mode 0700
    this.file = join(this.dir, "bundle");
    this.fd = openSync(this.file, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  }

  /** Refuses, before a byte is written, a bundle of `bytes` that the copy's file system cannot hold with headroom to spare. */
  checkSpace(bytes: number): void {
    const st = statfsSync(this.dir);
    const free = st.bavail * st.bsize;
    if (free < bytes + DOWNLOAD_HEADROOM)
      throw new BundleRefused(
        `refused: ${this.name} needs ${mib(bytes)} plus ${mib(DOWNLOAD_HEADROOM)} to spare; ${this.dir} has ${mib(free)} free`,
      );
  }

  write(chunk: Buffer): void {
    this.size += chunk.length;
    if (this.size > this.maxBytes) throw new BundleRefused(`refused: ${this.name} is larger than ${this.maxBytes} bytes (--max-size)`);
    let off = 0;
    while (off < chunk.length) off += writeSync(this.fd!, chunk, off);
    if (this.header) {
      this.hash.update(chunk);
      return;
    }
    this.head = Buffer.concat([this.head, chunk]);
    const h = parseHeader(this.head, this.name);
    if (h) {
      this.header = h;
      this.hash.update(this.head.subarray(h.payloadOffset));
      this.head = Buffer.alloc(0);
    } else if (this.head.length > MAX_HEADER) {
      throw new BundleRefused(`${this.name} is not a sitegate bundle`);
    }
  }

  /** Closes the copy; what it holds, or a BundleRefused when it is not a whole bundle. */
  finish(): ReceivedBundle {
    this.close();
    if (!this.header) throw new BundleRefused(`${this.name} is not a sitegate bundle (truncated)`);
    const payloadSize = this.size - this.header.payloadOffset;
    return { ...this.header, file: this.file, payloadSize, payloadSha256: this.hash.digest("hex") };
  }

  /** Removes the copy and its folder (always called, on success and failure alike). */
  discard(): void {
    this.close();
    rmSync(this.dir, { recursive: true, force: true });
  }

  private close(): void {
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
  }
}

/** Copies a local bundle file: one open, no symlink as its last component, a regular file. */
export function receiveFile(path: string, into: Incoming): void {
  let fd: number;
  try {
    // O_NONBLOCK: a FIFO put in the bundle's place must not hang the open
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "ELOOP") throw new BundleRefused(`refused: ${path} is a symbolic link (give the bundle file itself)`);
    if (code === "ENOENT") throw new SitegateError("UPDATE_FAILED", `${path}: no such file`);
    throw e;
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw new BundleRefused(`refused: ${path} is not a regular file`);
    into.checkSpace(st.size);
    const buf = Buffer.alloc(1 << 20);
    for (;;) {
      const n = readSync(fd, buf, 0, buf.length, null);
      if (n === 0) break;
      into.write(buf.subarray(0, n));
    }
  } finally {
    closeSync(fd);
  }
}

export interface DownloadLimits {
  /** the largest bundle taken in */
  maxBytes: number;
  /** when set, the URL and every redirect must start with one of these (update.allowed_urls) */
  allowed?: readonly string[];
  /** the size the request announced: the server must announce the same, and no more is read */
  size?: number;
}

/**
 * Downloads a bundle: https only, at every redirect too, within the allowed URLs when given,
 * and at most the byte cap. Before the first byte is written the announced size (or, when
 * the server announces none, the cap) must fit on the copy's file system.
 */
export async function receiveUrl(url: string, into: Incoming, limits: DownloadLimits): Promise<void> {
  const max = Math.min(limits.maxBytes, limits.size ?? Infinity);
  let at = url;
  const signal = AbortSignal.timeout(DOWNLOAD_TIMEOUT_MS);
  for (let hop = 0; ; hop++) {
    checkFetchable(at, limits.allowed);
    const res = await httpsGet(at, signal);
    const status = res.statusCode ?? 0;
    if (status >= 300 && status < 400 && res.headers.location) {
      res.destroy();
      if (hop >= MAX_REDIRECTS) throw new BundleRefused(`refused: more than ${MAX_REDIRECTS} redirects from ${url}`);
      const next = new URL(res.headers.location, at).href;
      if (new URL(next).protocol !== "https:") throw new BundleRefused(`refused: ${at} redirects to ${next}; only https:// is followed`);
      at = next;
      continue;
    }
    try {
      if (status < 200 || status > 299) throw new SitegateError("UPDATE_FAILED", `download ${at}: HTTP ${status}`, { transient: true });
      const length = Number(res.headers["content-length"] ?? NaN);
      if (limits.size !== undefined && !Number.isNaN(length) && length !== limits.size)
        throw new BundleRefused(`refused: ${at} is ${length} bytes, the request announced ${limits.size}`);
      if (length > max) throw new BundleRefused(`refused: ${at} is ${length} bytes, more than ${max} (--max-size)`);
      into.checkSpace(Number.isNaN(length) ? max : length);
      for await (const chunk of res) into.write(chunk as Buffer);
    } finally {
      res.destroy();
    }
    if (!res.complete)
      throw new SitegateError("UPDATE_FAILED", `download ${at}: the connection closed before the whole body`, { transient: true });
    return;
  }
}

/**
 * One GET, answered once the headers are in. node:https and not fetch(): fetch parses HTTP
 * with WebAssembly, which the request unit's node does not have (--jitless, for
 * MemoryDenyWriteExecute); node:https parses it in native code.
 */
function httpsGet(url: string, signal: AbortSignal): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(url, { method: "GET", signal }, resolve);
    req.once("error", (e) => reject(new SitegateError("UPDATE_FAILED", `download ${url}: ${e.message}`, { transient: true })));
    req.end();
  });
}

function checkFetchable(at: string, allowed: readonly string[] | undefined): void {
  if (new URL(at).protocol !== "https:") throw new BundleRefused(`refused: only https:// URLs are fetched (${at})`);
  const why = allowed ? updateUrlRefusal(at, allowed) : null;
  if (why) throw new BundleRefused(`refused: ${at} ${why}`);
}

/** Removes copies left by applies that died (their pid is gone); a live apply's copy stays. */
export function removeStaleIncoming(root: string, alive: (pid: number) => boolean): void {
  let names: string[];
  try {
    names = readdirSync(root);
  } catch {
    return;
  }
  for (const n of names) {
    const m = /^\.incoming-(\d+)-/.exec(n);
    if (m && !alive(Number(m[1]))) rmSync(join(root, n), { recursive: true, force: true });
  }
}

function mib(bytes: number): string {
  return `${(bytes / 1048576).toFixed(1)} MiB`;
}
