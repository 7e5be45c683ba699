// Signed fleet commands: with fleet.command_keys set, a command carries three MQTT v5
// user properties (sg-issued-at, sg-nonce, sg-signature) and is run only when an ed25519
// signature by one of those keys covers this site, the command name, the payload's
// sha256, the issue time and the nonce; when it is at most command_max_age_s old; and when
// its nonce was never seen (the fleet queue keeps nonces in SQLite until they expire).
// The signed text is documented in docs/security.md, Fleet commands; `sitegate fleet sign` makes it.
import { createHash, createPrivateKey, createPublicKey, randomBytes, sign, verify, type KeyObject } from "node:crypto";
import { SitegateError } from "../errors.js";

export const SIGNATURE_PROPS = { issuedAt: "sg-issued-at", nonce: "sg-nonce", signature: "sg-signature" } as const;
/** How far ahead of our clock a command may be dated (clocks of two machines differ). */
export const FUTURE_SKEW_MS = 60_000;
const DOMAIN = "sitegate-fleet-command/1";
const NONCE = /^[A-Za-z0-9_-]{16,64}$/;
const ISSUED_AT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,3})?Z$/;
const SIGNATURE = /^[A-Za-z0-9+/_-]{86}(==)?$/;

export interface SignedFields {
  site: string;
  name: string;
  body: Buffer;
  issuedAt: string;
  nonce: string;
}

/** The bytes that are signed: one field per line, the payload as its sha256 in hex. */
export function signedText(f: SignedFields): Buffer {
  const bodyHash = createHash("sha256").update(f.body).digest("hex");
  return Buffer.from([DOMAIN, f.site, f.name, bodyHash, f.issuedAt, f.nonce].join("\n"), "utf8");
}

/** The user properties of a signed command (a fresh nonce; issued now unless given). */
export function signCommand(
  privateKeyPem: string | KeyObject,
  c: { site: string; name: string; body: Buffer; issuedAt?: string; nonce?: string },
): Record<string, string> {
  const key = typeof privateKeyPem === "string" ? createPrivateKey(privateKeyPem) : privateKeyPem;
  if (key.asymmetricKeyType !== "ed25519") throw new SitegateError("CONFIG_INVALID", `the key is ${key.asymmetricKeyType}, not ed25519`);
  const issuedAt = c.issuedAt ?? new Date().toISOString();
  const nonce = c.nonce ?? randomBytes(16).toString("base64url");
  const signature = sign(null, signedText({ site: c.site, name: c.name, body: c.body, issuedAt, nonce }), key).toString("base64");
  return { [SIGNATURE_PROPS.issuedAt]: issuedAt, [SIGNATURE_PROPS.nonce]: nonce, [SIGNATURE_PROPS.signature]: signature };
}

export type Verdict =
  | { ok: true; nonce: string; /** Epoch ms after which the nonce may be forgotten: the command is stale by then. */ expiresAt: number }
  | { ok: false; message: string };

type UserProperties = Record<string, string | string[]> | undefined;

function one(props: UserProperties, name: string): string | undefined | null {
  const v = props?.[name];
  if (Array.isArray(v)) return v.length === 1 ? v[0] : null; // given twice: which one was signed?
  return v;
}

/** Checks signature and age (pure: the nonce is claimed by the caller, durably, before it runs the command). */
export class CommandVerifier {
  private readonly keys: KeyObject[];

  constructor(
    keysPem: readonly string[],
    private readonly maxAgeS: number,
  ) {
    this.keys = keysPem.map((k) => createPublicKey(k));
  }

  check(site: string, name: string, body: Buffer, props: UserProperties, now: number): Verdict {
    const issuedAt = one(props, SIGNATURE_PROPS.issuedAt);
    const nonce = one(props, SIGNATURE_PROPS.nonce);
    const signature = one(props, SIGNATURE_PROPS.signature);
    if (issuedAt === undefined && nonce === undefined && signature === undefined) {
      return {
        ok: false,
        message: `unsigned command refused: this gateway requires the user properties ${Object.values(SIGNATURE_PROPS).join(", ")}`,
      };
    }
    if (typeof issuedAt !== "string" || !ISSUED_AT.test(issuedAt))
      return { ok: false, message: `${SIGNATURE_PROPS.issuedAt} must be one UTC time like 2025-01-31T12:00:00.000Z` };
    if (typeof nonce !== "string" || !NONCE.test(nonce))
      return { ok: false, message: `${SIGNATURE_PROPS.nonce} must be one string of 16..64 letters, digits, - or _` };
    if (typeof signature !== "string" || !SIGNATURE.test(signature))
      return { ok: false, message: `${SIGNATURE_PROPS.signature} must be one base64 ed25519 signature (64 bytes)` };
    const text = signedText({ site, name, body, issuedAt, nonce });
    const sig = Buffer.from(signature, signature.includes("-") || signature.includes("_") ? "base64url" : "base64");
    if (!this.keys.some((k) => verify(null, text, k, sig)))
      return {
        ok: false,
        message:
          "the signature does not verify with any key in fleet.command_keys (over this site, command, payload, issue time and nonce)",
      };
    const at = Date.parse(issuedAt);
    if (Number.isNaN(at)) return { ok: false, message: `${SIGNATURE_PROPS.issuedAt} is not a valid time` };
    const age = now - at;
    if (age > this.maxAgeS * 1000)
      return {
        ok: false,
        message: `the command was issued ${Math.round(age / 1000)} s ago; older than fleet.command_max_age_s (${this.maxAgeS} s) is refused`,
      };
    if (-age > FUTURE_SKEW_MS)
      return {
        ok: false,
        message: `the command is dated ${Math.round(-age / 1000)} s ahead of the gateway's clock; more than ${FUTURE_SKEW_MS / 1000} s is refused`,
      };
    return { ok: true, nonce, expiresAt: at + this.maxAgeS * 1000 };
  }
}
