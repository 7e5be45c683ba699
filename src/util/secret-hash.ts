// scrypt hashes for passwords and API keys, in the one text form the config accepts:
//   scrypt$<N>$<r>$<p>$<salt base64>$<hash base64>
import { scryptSync, randomBytes, timingSafeEqual } from "node:crypto";

const N = 16384;
const R = 8;
const P = 1;
const KEYLEN = 32;

export const SECRET_HASH_PATTERN = /^scrypt\$(\d+)\$(\d+)\$(\d+)\$([A-Za-z0-9+/=]+)\$([A-Za-z0-9+/=]+)$/;

export function hashSecret(secret: string): string {
  const salt = randomBytes(16);
  const hash = scryptSync(secret, salt, KEYLEN, { N, r: R, p: P });
  return `scrypt$${N}$${R}$${P}$${salt.toString("base64")}$${hash.toString("base64")}`;
}

/** Constant-time check of a secret against a hash made by hashSecret. */
export function verifySecret(secret: string, encoded: string): boolean {
  const m = SECRET_HASH_PATTERN.exec(encoded);
  if (!m) return false;
  const [, n, r, p, saltB64, hashB64] = m;
  const expected = Buffer.from(hashB64, "base64");
  const actual = scryptSync(secret, Buffer.from(saltB64, "base64"), expected.length, {
    N: Number(n),
    r: Number(r),
    p: Number(p),
    maxmem: 256 * Number(n) * Number(r) + 1024 * 1024,
  });
  return expected.length === actual.length && timingSafeEqual(expected, actual);
}
