// Credentials of the API: OAuth bearer tokens (random, stored only as SHA-256 hashes with
// their expiry, their user and a fingerprint of that user's password hash), API keys
// (scrypt hashes from the config, verified once then cached by SHA-256 so scrypt is not
// paid per request), and the source-IP allowlists (ip_allowlist for the partner webhooks,
// admin_allowlist for the token endpoint and /gateway/admin/). scrypt runs off the event
// loop (verifySecretAsync). Wrong API keys are counted per source address before scrypt
// runs: past KEY_IP_FAILURES a minute the source's unknown keys are refused (429) unchecked,
// while a key already verified still passes (docs/security.md, "Guessing").
//
// A token is bound to its user: it is refused once the user is no longer in the config or
// its password_hash changed (a new fingerprint), and `sitegate token revoke` deletes rows
// from the same table the daemon reads on every request.
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { BlockList, isIPv4 } from "node:net";
import type { Config } from "../config/schema.js";
import { SitegateError } from "../errors.js";
import { storageWrite, type Db, type ModuleMigrations } from "../storage/db.js";
import { commitDurably } from "../storage/durable.js";
import { hashSecretAsync, verifySecretAsync } from "../util/secret-hash.js";
import { FailureThrottle } from "./throttle.js";

/** Wrong API keys per source address per minute; the source's next unknown key is 429, unchecked. */
export const KEY_IP_FAILURES = 10;

export type KeyCheck = { result: "ok" } | { result: "wrong" } | { result: "wait"; retryAfterS: number };

export const AUTH_MIGRATIONS: ModuleMigrations = {
  module: "api",
  migrations: [
    {
      version: 1,
      sql: `CREATE TABLE api_token (hash TEXT PRIMARY KEY, username TEXT NOT NULL, issued_at INTEGER NOT NULL, expires_at INTEGER NOT NULL) WITHOUT ROWID;
            CREATE INDEX api_token_expiry ON api_token (expires_at);`,
    },
    // Rows from before are unbound (cred ''): refused, the partner fetches a new token.
    { version: 2, sql: "ALTER TABLE api_token ADD COLUMN cred TEXT NOT NULL DEFAULT ''" },
  ],
};

const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");

/** The binding of a token to its user's current password hash (not secret, not reversible). */
export function credentialFingerprint(passwordHash: string): string {
  return sha256(`sitegate-token-binding\0${passwordHash}`).slice(0, 32);
}

export type TokenState = "ok" | "expired" | "unknown" | "revoked";

export class TokenStore {
  private readonly insert;
  private readonly lookup;
  private readonly purge;
  private readonly remove;
  private lastPurge = 0;

  /**
   * `binding(username)` is the user's current credential fingerprint, undefined when the
   * user is gone: a token whose stored fingerprint differs is "revoked".
   */
  constructor(
    private readonly db: Db,
    private readonly ttlS: number,
    private readonly now: () => number = Date.now,
    private readonly binding: (username: string) => string | undefined = () => undefined,
  ) {
    this.insert = db.prepare("INSERT INTO api_token (hash, username, issued_at, expires_at, cred) VALUES (?, ?, ?, ?, ?)");
    this.lookup = db.prepare("SELECT username, expires_at, cred FROM api_token WHERE hash = ?");
    this.purge = db.prepare("DELETE FROM api_token WHERE expires_at <= ?");
    this.remove = db.prepare("DELETE FROM api_token WHERE hash = ?");
  }

  /** Commits a new token bound to the user's credentials and returns it; only its hash is stored. */
  issue(username: string): { token: string; expiresIn: number } {
    const now = this.now();
    const cred = this.binding(username);
    if (cred === undefined) throw new SitegateError("INTERNAL", `no user ${username} to bind a token to`);
    const token = randomBytes(32).toString("base64url");
    const purge = now - this.lastPurge > 60_000;
    // Durable: a token the caller was given must not vanish in a power cut. The purge
    // shares the commit, so storage that cannot commit refuses the request as a whole.
    commitDurably(this.db, () => {
      if (purge) this.purge.run(now);
      this.insert.run(sha256(token), username, now, now + this.ttlS * 1000, cred);
    });
    if (purge) this.lastPurge = now;
    return { token, expiresIn: this.ttlS };
  }

  check(token: string): TokenState {
    const row = this.lookup.get(sha256(token)) as { username: string; expires_at: number; cred: string } | undefined;
    if (!row) return "unknown";
    const cred = this.binding(row.username);
    if (cred === undefined || row.cred === "" || row.cred !== cred) {
      storageWrite(() => this.remove.run(sha256(token))); // dead for good, even if the old hash comes back
      return "revoked";
    }
    return row.expires_at > this.now() ? "ok" : "expired";
  }
}

/** `sitegate token revoke`: deletes issued tokens (all, or one user's). Returns how many. */
export function revokeTokens(db: Db, username?: string): number {
  // Durable before "revoked" is printed: a revoked token must stay revoked after a power cut.
  const r = commitDurably(db, () =>
    username === undefined
      ? db.prepare("DELETE FROM api_token").run()
      : db.prepare("DELETE FROM api_token WHERE username = ?").run(username),
  );
  return r.changes;
}

/** Live tokens per user, for `sitegate token list`. */
export function tokenCounts(db: Db, now: number): Array<{ username: string; tokens: number; last_issued_at: number }> {
  return db
    .prepare(
      "SELECT username, count(*) AS tokens, max(issued_at) AS last_issued_at FROM api_token WHERE expires_at > ? GROUP BY username ORDER BY username",
    )
    .all(now) as Array<{ username: string; tokens: number; last_issued_at: number }>;
}

export class Credentials {
  private readonly users: Map<string, string>;
  private readonly keyHashes: string[];
  private readonly knownKeys = new Set<string>();
  private readonly allow = new BlockList();
  private readonly adminAllow = new BlockList();
  /**
   * Verifying an unknown user costs as much as a known one: no user enumeration by timing.
   * Made on first use: scrypt's 16 MiB work buffer at every start was the daemon's peak.
   */
  private dummy: Promise<string> | null = null;
  private dummyHash(): Promise<string> {
    this.dummy ??= hashSecretAsync(randomBytes(16).toString("hex")).catch((e: unknown) => {
      this.dummy = null; // busy now: the next unknown username makes it again
      throw e;
    });
    return this.dummy;
  }

  /** Wrong API keys per source (its own count: a key guesser never locks the token endpoint, nor the reverse). */
  private readonly keySources: FailureThrottle;

  constructor(
    private readonly config: Config,
    now: () => number = Date.now,
  ) {
    this.keySources = new FailureThrottle({ max: KEY_IP_FAILURES, windowMs: 60_000, capacity: 4096, now });
    this.users = new Map(config.auth.users.map((u) => [u.username, u.password_hash]));
    this.keyHashes = config.auth.api_keys.map((k) => k.key_hash);
    for (const cidr of config.auth.ip_allowlist) addCidr(this.allow, cidr);
    for (const cidr of config.auth.admin_allowlist) addCidr(this.adminAllow, cidr);
  }

  clientIdMatches(clientId: string): boolean {
    const a = Buffer.from(clientId);
    const b = Buffer.from(this.config.auth.client_id);
    return a.length === b.length && timingSafeEqual(a, b);
  }

  /** scrypt on the thread pool; throws HashBusyError when too many checks wait. */
  async checkPassword(username: string, password: string): Promise<boolean> {
    const hash = this.users.get(username);
    const ok = await verifySecretAsync(password, hash ?? (await this.dummyHash()));
    return hash !== undefined && ok;
  }

  /** The fingerprint a token of this user is bound to; undefined when no such user. */
  fingerprint(username: string): string | undefined {
    const hash = this.users.get(username);
    return hash === undefined ? undefined : credentialFingerprint(hash);
  }

  /** Per connection (its TLS socket), the key it has shown valid: compared in constant time, not hashed again. */
  private readonly connKeys = new WeakMap<object, Buffer>();

  /**
   * checkApiKey() for a request on `conn`: a connection that showed a valid key and shows
   * the same one again is answered by a constant-time compare with it (no hash per
   * request on a keep-alive connection); any other key is checked in full (and counted).
   */
  async checkApiKeyOn(conn: object, key: string, source: string): Promise<KeyCheck> {
    if (this.shownOn(conn, key)) return { result: "ok" };
    const check = await this.checkApiKey(key, source);
    if (check.result === "ok") this.connKeys.set(conn, Buffer.from(key));
    return check;
  }

  /** Whether `conn` has shown this valid key before (a constant-time compare): checkApiKeyOn's synchronous first step. */
  shownOn(conn: object, key: string): boolean {
    const shown = this.connKeys.get(conn);
    if (shown === undefined) return false;
    const b = Buffer.from(key);
    return b.length === shown.length && timingSafeEqual(b, shown);
  }

  /**
   * A key from `source` (sourceKey of the address): a verified key passes at once; an unknown
   * one is counted as a failure of the source BEFORE scrypt runs (parallel guesses are
   * limited like sequential ones) and taken back when it is right or the check was refused
   * as busy (HashBusyError, rethrown); a source past its failures waits, unchecked.
   */
  async checkApiKey(key: string, source: string): Promise<KeyCheck> {
    const h = sha256(key);
    if (this.knownKeys.has(h)) return { result: "ok" };
    const wait = this.keySources.retryAfterS(source);
    if (wait > 0) return { result: "wait", retryAfterS: wait };
    const at = this.keySources.fail(source);
    let ok = false;
    try {
      for (const kh of this.keyHashes) if (!ok && (await verifySecretAsync(key, kh))) ok = true;
    } catch (e) {
      this.keySources.forgive(source, at);
      throw e;
    }
    if (!ok) return { result: "wrong" };
    this.keySources.forgive(source, at);
    this.knownKeys.add(h);
    return { result: "ok" };
  }

  private readonly ipCache = new Map<string, boolean>();
  private readonly adminCache = new Map<string, boolean>();

  ipAllowed(ip: string): boolean {
    return cached(this.ipCache, ip, () => ipInList(this.allow, ip));
  }

  /** auth.admin_allowlist: the token endpoint and /gateway/admin/. */
  adminIpAllowed(ip: string): boolean {
    return cached(this.adminCache, ip, () => ipInList(this.adminAllow, ip));
  }
}

function cached(cache: Map<string, boolean>, ip: string, compute: () => boolean): boolean {
  let ok = cache.get(ip);
  if (ok === undefined) {
    ok = compute();
    if (cache.size >= 1024) cache.clear(); // bounded: a cache of a pure function, safe to drop
    cache.set(ip, ok);
  }
  return ok;
}

export function addCidr(list: BlockList, cidr: string): void {
  const [addr = "", bits] = cidr.split("/");
  const type = isIPv4(addr) ? "ipv4" : "ipv6";
  list.addSubnet(addr, Number(bits), type);
}

export function ipInList(list: BlockList, ip: string): boolean {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip)?.[1];
  if (mapped) return list.check(mapped, "ipv4");
  return list.check(ip, isIPv4(ip) ? "ipv4" : "ipv6");
}

/** Whether an address is on any of the lists (CIDRs), for the connection gate: cached, bounded. */
export function onAnyList(lists: ReadonlyArray<readonly string[]>): (ip: string) => boolean {
  const all = new BlockList();
  for (const list of lists) for (const cidr of list) addCidr(all, cidr);
  const cache = new Map<string, boolean>();
  return (ip) => cached(cache, ip, () => ipInList(all, ip));
}
