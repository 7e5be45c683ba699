// The release bundle file and its signature. A bundle is one file:
//   "SGBUNDLE1\n" | u32 manifest length | manifest JSON | u32 signature length | ed25519 signature of the manifest bytes | payload (tar.gz)
// The manifest carries the payload's size and sha256, so one signature covers everything,
// and the whole file is checked before a single byte of the payload is unpacked.
import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, sign, verify, type KeyObject } from "node:crypto";
import { closeSync, createReadStream, existsSync, openSync, readdirSync, readFileSync, readSync, statSync } from "node:fs";
import { join } from "node:path";

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
  /** highest migration version per module; a database behind any of them is backed up first */
  migrations: Record<string, number>;
}

/** Why a bundle is refused; the CLI prints the message and exits 2. */
export class BundleRefused extends Error {
  constructor(message: string) {
    super(message);
    this.name = "BundleRefused";
  }
}

export interface OpenedBundle {
  manifest: Manifest;
  manifestBytes: Buffer;
  signature: Buffer;
  payloadOffset: number;
  payloadSize: number;
  file: string;
}

/** Reads the header of a bundle file (no checks beyond its shape). */
export function openBundle(file: string): OpenedBundle {
  const size = statSync(file).size;
  const fd = openSync(file, "r");
  try {
    const read = (pos: number, len: number): Buffer => {
      if (pos + len > size) throw new BundleRefused(`${file} is not a sitegate bundle (truncated)`);
      const b = Buffer.alloc(len);
      readSync(fd, b, 0, len, pos);
      return b;
    };
    if (!read(0, MAGIC.length).equals(MAGIC)) throw new BundleRefused(`${file} is not a sitegate bundle`);
    let pos = MAGIC.length;
    const mlen = read(pos, 4).readUInt32BE(0);
    if (mlen > 1 << 20) throw new BundleRefused(`${file} is not a sitegate bundle (manifest too large)`);
    const manifestBytes = read(pos + 4, mlen);
    pos += 4 + mlen;
    const slen = read(pos, 4).readUInt32BE(0);
    if (slen > 1024) throw new BundleRefused(`${file} is not a sitegate bundle (signature too large)`);
    const signature = read(pos + 4, slen);
    pos += 4 + slen;
    let manifest: Manifest;
    try {
      manifest = JSON.parse(manifestBytes.toString("utf8")) as Manifest;
    } catch {
      throw new BundleRefused(`${file}: the manifest is not JSON`);
    }
    return { manifest, manifestBytes, signature, payloadOffset: pos, payloadSize: size - pos, file };
  } finally {
    closeSync(fd);
  }
}

/** The name of the trusted key that signed the manifest, or a BundleRefused. */
export function checkSignature(b: OpenedBundle, keys: TrustedKey[]): string {
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
  for (const f of readdirSync(dir).filter((n) => n.endsWith(".pub")).sort()) {
    const key = createPublicKey(readFileSync(join(dir, f)));
    if (key.asymmetricKeyType !== "ed25519") throw new Error(`${join(dir, f)} is not an ed25519 public key`);
    out.push({ name: f, key });
  }
  return out;
}

export function loadPrivateKey(file: string): KeyObject {
  const key = createPrivateKey(readFileSync(file));
  if (key.asymmetricKeyType !== "ed25519") throw new Error(`${file} is not an ed25519 private key`);
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

/** Compares x.y.z[-pre] versions: negative when a < b. A pre-release sorts before its release. */
export function compareVersions(a: string, b: string): number {
  const [ma, pa] = splitPre(a);
  const [mb, pb] = splitPre(b);
  for (let i = 0; i < Math.max(ma.length, mb.length); i++) {
    const d = (ma[i] ?? 0) - (mb[i] ?? 0);
    if (d !== 0) return Math.sign(d);
  }
  if (pa === pb) return 0;
  if (pa === "") return 1;
  if (pb === "") return -1;
  return pa < pb ? -1 : 1;
}

function splitPre(v: string): [number[], string] {
  const m = /^v?(\d+(?:\.\d+)*)(?:-([0-9A-Za-z.-]+))?(?:\+.*)?$/.exec(v.trim());
  if (!m) throw new BundleRefused(`refused: "${v}" is not a version`);
  return [m[1].split(".").map(Number), m[2] ?? ""];
}

export function isValidVersion(v: string): boolean {
  return /^\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?$/.test(v);
}
