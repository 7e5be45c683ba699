// The secrets published in config.example.yaml and the docs. A config whose password or API
// key hash verifies against one of them would let anyone who has read the docs in, so `run`
// and `check-config` refuse it by path. One scrypt per hash and example value (about 55 ms
// each on an x86 core, some 200 ms on a Pi 4), paid once per load.
import type { ErrorDetail } from "../errors.js";
import { verifySecret } from "../util/secret-hash.js";
import type { Config } from "./schema.js";

/** Clear values that example configs and old docs carried; their hashes circulate with them. */
export const EXAMPLE_SECRETS = ["change-me-password", "change-me-api-key"] as const;

const HINT = "make a secret of your own and its hash with `sitegate hash-secret` (or let `sitegate init` write the config)";

/** One problem per users[].password_hash or api_keys[].key_hash that an example secret verifies against. */
export function exampleSecretIssues(cfg: Pick<Config, "auth">): ErrorDetail[] {
  const hashes: Array<[string, string]> = [
    ...cfg.auth.users.map((u, i): [string, string] => [`auth.users[${i}].password_hash`, u.password_hash]),
    ...cfg.auth.api_keys.map((k, i): [string, string] => [`auth.api_keys[${i}].key_hash`, k.key_hash]),
  ];
  const out: ErrorDetail[] = [];
  for (const [path, hash] of hashes) {
    const known = EXAMPLE_SECRETS.find((s) => verifySecret(s, hash));
    if (known) out.push({ path, message: `is the hash of "${known}", an example secret everyone can read; ${HINT}` });
  }
  return out;
}
