// An update asked for by the fleet: the daemon (user sitegate) cannot install anything, so
// the `update` fleet command only leaves a request in `<data_dir>/update/request.json`. A
// root unit (sitegate-update-request.path) notices it and runs `sitegate update
// apply-request`, which takes the request in without following a link, removes it, and runs
// the normal apply path on its URL with one more check: the bundle's sha256 must be the one
// requested. A compromised daemon can thus ask only for what the signature check and the
// version floor allow anyway.
import { closeSync, constants, existsSync, fstatSync, mkdirSync, openSync, readSync, statSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { SitegateError } from "../errors.js";
import type { Config } from "../config/schema.js";
import { BundleRefused, isValidVersion } from "./bundle-format.js";
import { checkDataDir } from "./data-dir.js";
import { writeFileAtomic } from "./fsx.js";
import { testHook } from "../util/test-hooks.js";

/** Largest request file root reads; a real one is under 300 bytes. */
const MAX_REQUEST_BYTES = 4096;

export const updateRequestSchema = z.strictObject({
  url: z
    .string()
    .max(2048)
    .regex(/^https:\/\/[^\s]+$/i, "must be an https:// URL"),
  sha256: z
    .string()
    .regex(/^[0-9a-f]{64}$/i, "must be 64 hex digits (the bundle file's sha256)")
    .transform((s) => s.toLowerCase()),
  version: z.string().refine(isValidVersion, "must be a semantic version such as 1.4.0"),
  /** the bundle file's size in bytes: the download must announce this size and stops past it */
  size: z
    .number()
    .int()
    .min(1)
    .max(4 * 1024 * 1024 * 1024)
    .optional(),
});
export type UpdateRequest = z.infer<typeof updateRequestSchema>;

export function requestFile(dataDir: string): string {
  return join(dataDir, "update", "request.json");
}

/** Daemon side: records the request (atomically, fsynced) unless one is waiting already. */
export function writeUpdateRequest(dataDir: string, req: UpdateRequest, now = new Date()): void {
  mkdirSync(join(dataDir, "update"), { recursive: true });
  const file = requestFile(dataDir);
  try {
    closeSync(openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW));
    throw new SitegateError("CONFLICT", "an update request is already waiting to be applied");
  } catch (e) {
    if (e instanceof SitegateError) throw e;
    if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
  }
  writeFileAtomic(file, JSON.stringify({ ...req, requested_at: now.toISOString() }) + "\n", 0o640);
}

/** Where a request's URL stands against `update.allowed_urls`: null when allowed, else why not. */
export function updateUrlRefusal(url: string, allowed: readonly string[]): string | null {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return "is not a URL";
  }
  if (u.protocol !== "https:") return "must be an https:// URL";
  if (u.username || u.password) return "must not carry a user name or password";
  // the server may decode these into a "/" or "..", which the prefix below would not see
  if (/%(2f|5c|2e)/i.test(u.pathname)) return "must not hide /, \\ or . as %2F, %5C or %2E";
  if (allowed.length === 0) return "is not allowed: update.allowed_urls is empty, so this gateway takes no fleet updates";
  for (const a of allowed) {
    const p = new URL(a);
    if (u.origin === p.origin && u.pathname.startsWith(p.pathname)) return null;
  }
  return `is not under update.allowed_urls (${allowed.join(", ")})`;
}

/**
 * Why the config refuses a fleet update request for `url`, or null: unsigned requests need
 * update.allow_unsigned_requests, and the URL must be under update.allowed_urls. The daemon
 * answers with it, and root checks it again (the daemon's data dir is no proof of anything).
 */
export function requestPolicyRefusal(cfg: Pick<Config, "fleet" | "update">, url: string): { path: "body" | "url"; message: string } | null {
  if (!cfg.fleet?.command_keys && !cfg.update.allow_unsigned_requests)
    return {
      path: "body",
      message: "unsigned update requests are refused: set fleet.command_keys (or update.allow_unsigned_requests: true on a bench)",
    };
  const why = updateUrlRefusal(url, cfg.update.allowed_urls);
  return why ? { path: "url", message: `url ${url} ${why}` } : null;
}

/**
 * Root side: reads and removes the request. The data dir is the daemon's, so the request
 * is reached through a descriptor of the `update/` folder opened once with O_NOFOLLOW and
 * owned by the data dir's owner, and both the read and the removal name the file through
 * /proc/self/fd/<fd>: swapping `update/` for a link after that open changes nothing. The file
 * is opened once with O_NOFOLLOW, must be a small regular file, and its content is checked by
 * the same schema. Null when there is no request. A bad request is removed and refused.
 */
export async function takeUpdateRequest(dataDir: string): Promise<UpdateRequest | null> {
  checkDataDir(dataDir); // refuses a symlinked update/ folder
  const file = requestFile(dataDir);
  const dirFd = openUpdateDir(dataDir);
  if (dirFd === null) return null;
  let text: string | null;
  try {
    const inDir = `/proc/self/fd/${dirFd}/request.json`;
    text = readRequest(inDir, file);
    if (text === null) return null;
    await testHook("request-read");
    unlinkSync(inDir);
  } catch (e) {
    // removed whatever went wrong: the path unit would start us again and again for it
    try {
      unlinkIfThere(`/proc/self/fd/${dirFd}/request.json`);
    } catch {
      /* the first error is the one to report */
    }
    throw e;
  } finally {
    closeSync(dirFd);
  }
  return parseRequest(text, file);
}

/** The data dir's `update/` folder, opened without following a link; null when there is none. */
function openUpdateDir(dataDir: string): number | null {
  const dir = join(dataDir, "update");
  let fd: number;
  try {
    fd = openSync(dir, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return null;
    if (code === "ELOOP" || code === "ENOTDIR")
      throw new BundleRefused(`refused: ${dir} is not a folder (a link?); the updater follows no link in the data dir`);
    throw e;
  }
  const st = fstatSync(fd);
  const owner = statSync(dataDir);
  if (st.uid !== owner.uid) {
    closeSync(fd);
    throw new BundleRefused(`refused: ${dir} belongs to uid ${st.uid}, not to the data dir's owner (uid ${owner.uid})`);
  }
  if (!existsSync(`/proc/self/fd/${fd}`)) {
    closeSync(fd);
    throw new SitegateError("UPDATE_FAILED", `cannot reach ${dir} through /proc/self/fd (is /proc mounted?)`);
  }
  return fd;
}

/** The request's text, through the folder's descriptor; null when there is none. */
function readRequest(inDir: string, file: string): string | null {
  let fd: number;
  try {
    // O_NONBLOCK: a FIFO in its place must not hang the open
    fd = openSync(inDir, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return null;
    if (code === "ELOOP") throw new BundleRefused(`refused: ${file} is a symbolic link`);
    throw e;
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile() || st.size > MAX_REQUEST_BYTES)
      throw new BundleRefused(`refused: ${file} is not a regular file of at most ${MAX_REQUEST_BYTES} bytes`);
    const buf = Buffer.alloc(st.size);
    let off = 0;
    while (off < buf.length) {
      const n = readSync(fd, buf, off, buf.length - off, off);
      if (n === 0) break;
      off += n;
    }
    return buf.subarray(0, off).toString("utf8");
  } finally {
    closeSync(fd);
  }
}

function unlinkIfThere(path: string): void {
  try {
    unlinkSync(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
  }
}

function parseRequest(text: string, file: string): UpdateRequest {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new BundleRefused(`refused: ${file} is not JSON`);
  }
  const { requested_at: _at, ...rest } = (json ?? {}) as Record<string, unknown>;
  const r = updateRequestSchema.safeParse(rest);
  if (!r.success)
    throw new BundleRefused(`refused: ${file}: ${r.error.issues.map((i) => `${i.path.join(".") || "request"} ${i.message}`).join("; ")}`);
  return r.data;
}
