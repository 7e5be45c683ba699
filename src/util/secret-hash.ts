// scrypt hashes for passwords and API keys, in the one text form the config accepts:
//   scrypt$<N>$<r>$<p>$<salt base64>$<hash base64>
// The daemon verifies with verifySecretAsync: scrypt on libuv's thread pool, at most
// SCRYPT_CONCURRENCY at a time for the whole process (each costs 16 MiB and a core for
// tens of milliseconds on a Pi), with a bounded queue. The event loop never runs scrypt.
// The sync forms are for the CLI (`hash-secret`) and tests.
import { scrypt, scryptSync, randomBytes, timingSafeEqual, type ScryptOptions } from "node:crypto";
import { SitegateError } from "../errors.js";

const N = 16384;
const R = 8;
const P = 1;
const KEYLEN = 32;

/** scrypt runs at once for the whole process; the rest wait in a queue of MAX_WAITING. */
export const SCRYPT_CONCURRENCY = 2;
export const MAX_WAITING = 64;

export const SECRET_HASH_PATTERN = /^scrypt\$(\d+)\$(\d+)\$(\d+)\$([A-Za-z0-9+/=]+)\$([A-Za-z0-9+/=]+)$/;

/** Thrown by verifySecretAsync when MAX_WAITING verifications already wait: answer "busy, retry". */
export class HashBusyError extends SitegateError {
  constructor() {
    super("RATE_LIMITED", `${MAX_WAITING} secret checks are already waiting`, { transient: true });
  }
}

export function hashSecret(secret: string): string {
  const salt = randomBytes(16);
  const hash = scryptSync(secret, salt, KEYLEN, { N, r: R, p: P });
  return `scrypt$${N}$${R}$${P}$${salt.toString("base64")}$${hash.toString("base64")}`;
}

function parse(encoded: string): { salt: Buffer; expected: Buffer; opts: ScryptOptions } | null {
  const [, n, r, p, saltB64, hashB64] = SECRET_HASH_PATTERN.exec(encoded) ?? [];
  if (saltB64 === undefined || hashB64 === undefined) return null;
  return {
    salt: Buffer.from(saltB64, "base64"),
    expected: Buffer.from(hashB64, "base64"),
    opts: { N: Number(n), r: Number(r), p: Number(p), maxmem: 256 * Number(n) * Number(r) + 1024 * 1024 },
  };
}

/** Constant-time check of a secret against a hash made by hashSecret (sync: CLI and tests only). */
export function verifySecret(secret: string, encoded: string): boolean {
  const h = parse(encoded);
  if (!h) return false;
  const actual = scryptSync(secret, h.salt, h.expected.length, h.opts);
  return h.expected.length === actual.length && timingSafeEqual(h.expected, actual);
}

let running = 0;
const waiting: Array<() => void> = [];

function release(): void {
  const next = waiting.shift();
  if (next) next();
  else running--;
}

async function slot(): Promise<void> {
  if (running < SCRYPT_CONCURRENCY) {
    running++;
    return;
  }
  if (waiting.length >= MAX_WAITING) throw new HashBusyError();
  await new Promise<void>((resolve) => waiting.push(resolve)); // the slot is handed over by release()
}

/** scrypt off the event loop, within the process-wide concurrency. */
async function scryptLimited(secret: string, salt: Buffer, keylen: number, opts: ScryptOptions): Promise<Buffer> {
  await slot();
  try {
    return await new Promise<Buffer>((resolve, reject) =>
      scrypt(secret, salt, keylen, opts, (err, key) => (err ? reject(err) : resolve(key))),
    );
  } finally {
    release();
  }
}

/** verifySecret on the thread pool; throws HashBusyError when the queue is full. */
export async function verifySecretAsync(secret: string, encoded: string): Promise<boolean> {
  const h = parse(encoded);
  if (!h) return false;
  const actual = await scryptLimited(secret, h.salt, h.expected.length, h.opts);
  return h.expected.length === actual.length && timingSafeEqual(h.expected, actual);
}

/** hashSecret on the thread pool (the daemon's dummy hash). */
export async function hashSecretAsync(secret: string): Promise<string> {
  const salt = randomBytes(16);
  const hash = await scryptLimited(secret, salt, KEYLEN, { N, r: R, p: P });
  return `scrypt$${N}$${R}$${P}$${salt.toString("base64")}$${hash.toString("base64")}`;
}

/** For tests: how many checks run and wait now. */
export function scryptLoad(): { running: number; waiting: number } {
  return { running, waiting: waiting.length };
}
