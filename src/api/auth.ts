// Credentials of the API: OAuth bearer tokens (random, stored only as SHA-256 hashes with
// their expiry), API keys (scrypt hashes from the config, verified once then cached by
// SHA-256 so scrypt is not paid per request), and the source-IP allowlist.
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { BlockList, isIPv4 } from "node:net";
import type { Config } from "../config/schema.js";
import type { Db, ModuleMigrations } from "../storage/db.js";
import { hashSecret, verifySecret } from "../util/secret-hash.js";

export const AUTH_MIGRATIONS: ModuleMigrations = {
  module: "api",
  migrations: [
    {
      version: 1,
      sql: `CREATE TABLE api_token (hash TEXT PRIMARY KEY, username TEXT NOT NULL, issued_at INTEGER NOT NULL, expires_at INTEGER NOT NULL) WITHOUT ROWID;
            CREATE INDEX api_token_expiry ON api_token (expires_at);`,
    },
  ],
};

const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");

export class TokenStore {
  private readonly insert;
  private readonly lookup;
  private readonly purge;
  private lastPurge = 0;

  constructor(db: Db, private readonly ttlS: number, private readonly now: () => number = Date.now) {
    this.insert = db.prepare("INSERT INTO api_token (hash, username, issued_at, expires_at) VALUES (?, ?, ?, ?)");
    this.lookup = db.prepare("SELECT username, expires_at FROM api_token WHERE hash = ?");
    this.purge = db.prepare("DELETE FROM api_token WHERE expires_at <= ?");
  }

  /** Commits a new token and returns it; only its hash is stored. */
  issue(username: string): { token: string; expiresIn: number } {
    const now = this.now();
    if (now - this.lastPurge > 60_000) {
      this.purge.run(now);
      this.lastPurge = now;
    }
    const token = randomBytes(32).toString("base64url");
    this.insert.run(sha256(token), username, now, now + this.ttlS * 1000);
    return { token, expiresIn: this.ttlS };
  }

  /** "ok", "expired" or "unknown". */
  check(token: string): "ok" | "expired" | "unknown" {
    const row = this.lookup.get(sha256(token)) as { username: string; expires_at: number } | undefined;
    if (!row) return "unknown";
    return row.expires_at > this.now() ? "ok" : "expired";
  }
}

export class Credentials {
  private readonly users: Map<string, string>;
  private readonly keyHashes: string[];
  private readonly knownKeys = new Set<string>();
  private readonly allow = new BlockList();
  /**
   * Verifying an unknown user costs as much as a known one: no user enumeration by timing.
   * Made on first use: scrypt's 16 MiB work buffer at every start was the daemon's peak.
   */
  private dummy: string | null = null;
  private get dummyHash(): string {
    return (this.dummy ??= hashSecret(randomBytes(16).toString("hex")));
  }

  constructor(private readonly config: Config) {
    this.users = new Map(config.auth.users.map((u) => [u.username, u.password_hash]));
    this.keyHashes = config.auth.api_keys.map((k) => k.key_hash);
    for (const cidr of config.auth.ip_allowlist) addCidr(this.allow, cidr);
  }

  clientIdMatches(clientId: string): boolean {
    const a = Buffer.from(clientId);
    const b = Buffer.from(this.config.auth.client_id);
    return a.length === b.length && timingSafeEqual(a, b);
  }

  checkPassword(username: string, password: string): boolean {
    const hash = this.users.get(username);
    const ok = verifySecret(password, hash ?? this.dummyHash);
    return hash !== undefined && ok;
  }

  checkApiKey(key: string): boolean {
    const h = sha256(key);
    if (this.knownKeys.has(h)) return true;
    const ok = this.keyHashes.some((kh) => verifySecret(key, kh));
    if (ok) this.knownKeys.add(h);
    return ok;
  }

  private readonly ipCache = new Map<string, boolean>();

  ipAllowed(ip: string): boolean {
    let ok = this.ipCache.get(ip);
    if (ok === undefined) {
      ok = ipInList(this.allow, ip);
      if (this.ipCache.size >= 1024) this.ipCache.clear(); // bounded: many sources just start over
      this.ipCache.set(ip, ok);
    }
    return ok;
  }
}

export function addCidr(list: BlockList, cidr: string): void {
  const [addr, bits] = cidr.split("/");
  const type = isIPv4(addr) ? "ipv4" : "ipv6";
  list.addSubnet(addr, Number(bits), type);
}

export function ipInList(list: BlockList, ip: string): boolean {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  if (mapped) return list.check(mapped[1], "ipv4");
  return list.check(ip, isIPv4(ip) ? "ipv4" : "ipv6");
}
