// An update asked for by the fleet: the daemon (user sitegate) cannot install anything, so
// the `update` fleet command only leaves a request in `<data_dir>/update/request.json`. A
// root unit (sitegate-update-request.path) notices it and runs `sitegate update
// apply-request`, which takes the request in without following a link, removes it, and runs
// the normal apply path on its URL with one more check: the bundle's sha256 must be the one
// requested. A compromised daemon can thus ask only for what the signature check and the
// version floor allow anyway.
import { closeSync, constants, fstatSync, mkdirSync, openSync, readSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { SitegateError } from "../errors.js";
import { BundleRefused, isValidVersion } from "./bundle-format.js";
import { checkDataDir } from "./data-dir.js";
import { writeFileAtomic } from "./fsx.js";

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

/**
 * Root side: reads and removes the request. The data dir is the daemon's, so the file is
 * opened once with O_NOFOLLOW, must be a small regular file, and its content is checked by
 * the same schema. Null when there is no request. A bad request is removed and refused.
 */
export function takeUpdateRequest(dataDir: string): UpdateRequest | null {
  checkDataDir(dataDir); // refuses a symlinked update/ folder
  const file = requestFile(dataDir);
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return null;
    if (code === "ELOOP") {
      unlinkSync(file);
      throw new BundleRefused(`refused: ${file} is a symbolic link`);
    }
    throw e;
  }
  let text: string;
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
    text = buf.subarray(0, off).toString("utf8");
  } finally {
    closeSync(fd);
    unlinkSync(file);
  }
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
