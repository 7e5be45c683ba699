// Builds a valid gateway config for tests; override any part.
import { randomUUID } from "node:crypto";
import type { ConfigInput } from "../../src/config/schema.js";
import { parseConfig } from "../../src/load-config.js";
import type { Config } from "../../src/config/schema.js";
import { hashSecret } from "../../src/util/secret-hash.js";
import { testCert } from "./tls.js";

export const TEST_ORG = "6f1c2a4e-8d3b-4c5a-9e7f-0a1b2c3d4e5f";
export const TEST_PASSWORD = "partner-secret";
export const TEST_API_KEY = "test-api-key-0123456789";

let hashes: { password: string; key: string } | null = null;
function secretHashes(): { password: string; key: string } {
  hashes ??= { password: hashSecret(TEST_PASSWORD), key: hashSecret(TEST_API_KEY) };
  return hashes;
}

export function testConfigInput(dataDir: string, over: Partial<ConfigInput> = {}): ConfigInput {
  const cert = testCert();
  const h = secretHashes();
  return {
    site_id: "site-001",
    organization_id: TEST_ORG,
    api_version: "v1",
    data_dir: dataDir,
    log_level: "silent",
    http: { listen: "127.0.0.1:0", tls: { cert: cert.certFile, key: cert.keyFile } },
    auth: {
      client_id: "partner-portal",
      users: [{ username: "partner", password_hash: h.password }],
      token_ttl_s: 3600,
      api_keys: [{ name: "partner", key_hash: h.key }],
      ip_allowlist: ["127.0.0.1/32", "::1/128"],
    },
    partner: {
      headers: [{ name: "X-Partner-Key", value: "partner-header-value" }],
      execution_url: "https://127.0.0.1:9/exec",
      data_push_url: "https://127.0.0.1:9",
      data_push_path: "telemetry",
      ca_file: cert.certFile,
    },
    rtu_ports: {},
    telemetry: { poll_interval_ms: 1000, retention_max_mb: 512, commit_interval_s: 1 },
    devices: [],
    ...over,
  };
}

export function testConfig(dataDir: string, over: Partial<ConfigInput> = {}): Config {
  return parseConfig(testConfigInput(dataDir, over), dataDir);
}

export function uniqueSuffix(): string {
  return randomUUID().slice(0, 8);
}
