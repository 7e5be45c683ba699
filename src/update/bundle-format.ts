// The release bundle file and its signature. A bundle is one file:
//   "SGBUNDLE1\n" | u32 manifest length | manifest JSON | u32 signature length | ed25519 signature of the manifest bytes | payload (tar.gz)
// The manifest carries the payload's size and sha256, so one signature covers everything,
// and the whole file is checked before a single byte of the payload is unpacked.
import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, sign, verify, type KeyObject } from "node:crypto";
import { createReadStream, existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { SitegateError } from "../errors.js";

export const MAGIC = Buffer.from("SGBUNDLE1\n");

export interface Manifest {
  format: 1;
  name: "sitegate";
  version: string;
  /** process.arch of the native modules in the payload */
  arch: string;
  platform: string;
  /** lowest Node.js version that runs the release */
  node_min: string;
  /** the Node.js the native addons were built for: its version and ABI (process.versions.modules) */
  node_version?: string;
  node_abi?: string;
  /** the payload carries that Node.js as node/bin/node (the unit runs it); false: the controller's own node */
  runtime?: boolean;
  created_at: string;
  payload_size: number;
  payload_sha256: string;
  /** bytes the payload unpacks to (file contents); checked against free space before unpacking, and enforced while unpacking */
  unpacked_size: number;
  /** highest migration version per module; a database behind any of them is backed up first */
  migrations: Record<string, number>;
}

/** Why a bundle is refused; the CLI prints the message and exits 2. */
export class BundleRefused extends SitegateError {
  constructor(message: string) {
    super("BUNDLE_REFUSED", message);
    this.name = "BundleRefused";
  }
}

export interface BundleHeader {
  manifest: Manifest;
  manifestBytes: Buffer;
  signature: Buffer;
  /** where the payload starts in the bundle file */
  payloadOffset: number;
}

/** The most a header can take: magic, two lengths, a manifest of at most 1 MiB, a signature of at most 1 KiB. */
export const MAX_HEADER = MAGIC.length + 8 + (1 << 20) + 1024;

/**
 * Parses the header at the start of `buf` (no checks beyond its shape): null while `buf` is too
 * short to hold it, a BundleRefused when it is not a bundle. `name` is for the messages.
 */
export function parseHeader(buf: Buffer, name: string): BundleHeader | null {
  const have = (n: number) => buf.length >= n;
  if (!have(MAGIC.length)) return MAGIC.subarray(0, buf.length).equals(buf) ? null : notABundle(name, "");
  if (!buf.subarray(0, MAGIC.length).equals(MAGIC)) return notABundle(name, "");
  let pos = MAGIC.length;
  if (!have(pos + 4)) return null;
  const mlen = buf.readUInt32BE(pos);
  if (mlen > 1 << 20) return notABundle(name, " (manifest too large)");
  if (!have(pos + 4 + mlen + 4)) return null;
  const manifestBytes = Buffer.from(buf.subarray(pos + 4, pos + 4 + mlen));
  pos += 4 + mlen;
  const slen = buf.readUInt32BE(pos);
  if (slen > 1024) return notABundle(name, " (signature too large)");
  if (!have(pos + 4 + slen)) return null;
  const signature = Buffer.from(buf.subarray(pos + 4, pos + 4 + slen));
  pos += 4 + slen;
  let manifest: Manifest;
  try {
    manifest = JSON.parse(manifestBytes.toString("utf8")) as Manifest;
  } catch {
    throw new BundleRefused(`${name}: the manifest is not JSON`);
  }
  return { manifest, manifestBytes, signature, payloadOffset: pos };
}

function notABundle(name: string, why: string): never {
  throw new BundleRefused(`${name} is not a sitegate bundle${why}`);
}

/** The name of the trusted key that signed the manifest, or a BundleRefused. */
export function checkSignature(b: BundleHeader, keys: TrustedKey[]): string {
  if (keys.length === 0) throw new BundleRefused("refused: no trusted update keys (see --keys)");
  for (const k of keys) {
    if (verify(null, b.manifestBytes, k.key, b.signature)) return k.name;
  }
  throw new BundleRefused(`refused: bad signature (not signed by any of ${keys.length} trusted key${keys.length === 1 ? "" : "s"})`);
}

export async function sha256OfRange(file: string, start: number, size: number): Promise<string> {
  const h = createHash("sha256");
  if (size > 0) for await (const chunk of createReadStream(file, { start, end: start + size - 1 })) h.update(chunk as Buffer);
  return h.digest("hex");
}

export function sha256(buf: Buffer): string {
  return createHash("sha256").update(buf).digest("hex");
}

export function encodeBundleHeader(manifest: Manifest, privateKey: KeyObject): Buffer {
  const manifestBytes = Buffer.from(JSON.stringify(manifest, null, 2) + "\n");
  const signature = sign(null, manifestBytes, privateKey);
  const u32 = (n: number) => {
    const b = Buffer.alloc(4);
    b.writeUInt32BE(n, 0);
    return b;
  };
  return Buffer.concat([MAGIC, u32(manifestBytes.length), manifestBytes, u32(signature.length), signature]);
}

// == keys ==

export interface TrustedKey {
  name: string;
  key: KeyObject;
}

/** Every `*.pub` (PEM, ed25519) in `dir`; a missing directory is no keys. */
export function loadTrustedKeys(dir: string): TrustedKey[] {
  if (!existsSync(dir)) return [];
  const out: TrustedKey[] = [];
  for (const f of readdirSync(dir)
    .filter((n) => n.endsWith(".pub"))
    .sort()) {
    const key = createPublicKey(readFileSync(join(dir, f)));
    if (key.asymmetricKeyType !== "ed25519") throw new SitegateError("UPDATE_FAILED", `${join(dir, f)} is not an ed25519 public key`);
    out.push({ name: f, key });
  }
  return out;
}

export function loadPrivateKey(file: string): KeyObject {
  const key = createPrivateKey(readFileSync(file));
  if (key.asymmetricKeyType !== "ed25519") throw new SitegateError("UPDATE_FAILED", `${file} is not an ed25519 private key`);
  return key;
}

export function generateKeyPair(): { publicPem: string; privatePem: string } {
  const { publicKey, privateKey } = generateKeyPairSync("ed25519");
  return {
    publicPem: publicKey.export({ type: "spki", format: "pem" }).toString(),
    privatePem: privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
  };
}

// == versions ==

const SEMVER =
  /^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*))?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?$/;

/**
 * Compares two versions by semver 2.0 precedence: negative when a < b. A pre-release sorts
 * before its release; pre-release identifiers compare one by one, numeric ones as numbers
 * (rc.9 < rc.10) and below alphanumeric ones, and a shorter list first when all else is equal.
 * Build metadata (+...) is ignored. Anything else is a BundleRefused.
 */
export function compareVersions(a: string, b: string): number {
  const va = parseVersion(a);
  const vb = parseVersion(b);
  for (const i of [0, 1, 2] as const) if (va.core[i] !== vb.core[i]) return va.core[i] < vb.core[i] ? -1 : 1;
  if (va.pre.length === 0 || vb.pre.length === 0) return va.pre.length === vb.pre.length ? 0 : va.pre.length === 0 ? 1 : -1;
  for (const [i, x] of va.pre.entries()) {
    const y = vb.pre[i];
    if (y === undefined) break; // b's list is the shorter: the lengths decide
    if (x === y) continue;
    const nx = /^\d+$/.test(x);
    const ny = /^\d+$/.test(y);
    if (nx && ny) return BigInt(x) < BigInt(y) ? -1 : 1;
    if (nx !== ny) return nx ? -1 : 1;
    return x < y ? -1 : 1;
  }
  return Math.sign(va.pre.length - vb.pre.length);
}

function parseVersion(v: string): { core: [bigint, bigint, bigint]; pre: string[] } {
  const [, major, minor, patch, pre] = SEMVER.exec(v.trim()) ?? [];
  if (major === undefined || minor === undefined || patch === undefined)
    throw new BundleRefused(`refused: "${v}" is not a version (x.y.z[-pre])`);
  return { core: [BigInt(major), BigInt(minor), BigInt(patch)], pre: pre === undefined ? [] : pre.split(".") };
}

/** A release version as bundles and release folders spell it: x.y.z[-pre], no "v", no build metadata. */
export function isValidVersion(v: string): boolean {
  return !v.startsWith("v") && !v.includes("+") && SEMVER.test(v);
}
