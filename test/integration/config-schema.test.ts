// `sitegate config-schema` prints a JSON Schema that a third-party validator (ajv, draft
// 2020-12) compiles, that accepts config.example.yaml as shipped, and that refuses what the
// zod schema refuses by shape: an unknown key, a wrong type, a missing required block.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { Ajv2020 } from "ajv/dist/2020.js";
import { parse } from "yaml";
import { CLI, sitegate } from "../support/cli.js";

const EXAMPLE = resolve(CLI, "../../../config.example.yaml");

function validator() {
  const r = sitegate(["config-schema"]);
  assert.equal(r.code, 0, r.stderr);
  const schema = JSON.parse(r.stdout) as Record<string, unknown>;
  assert.equal(schema.$schema, "https://json-schema.org/draft/2020-12/schema");
  return new Ajv2020({ allErrors: true, strict: false }).compile(schema);
}

/** config.example.yaml as an installer leaves it: its two REPLACE placeholders filled with `sitegate hash-secret` output. */
function filledExample(): Record<string, unknown> {
  const text = readFileSync(EXAMPLE, "utf8");
  const hash = sitegate(["hash-secret"], "a secret of this site\n").stdout.trim();
  assert.match(hash, /^scrypt\$/);
  return parse(text.replaceAll("REPLACE with the output of: sitegate hash-secret", hash)) as Record<string, unknown>;
}

test("config.example.yaml validates against `sitegate config-schema` with ajv once its placeholders are filled", () => {
  const validate = validator();
  assert.equal(validate(filledExample()), true, JSON.stringify(validate.errors, null, 2));
  // As shipped, the only complaints are the two placeholders it tells the installer to replace.
  assert.equal(validate(parse(readFileSync(EXAMPLE, "utf8"))), false);
  assert.deepEqual(validate.errors?.map((e) => e.instancePath).sort(), ["/auth/api_keys/0/key_hash", "/auth/users/0/password_hash"]);
});

test("the schema refuses an unknown key, a wrong type and a missing site_id, as check-config does", () => {
  const validate = validator();
  const example = filledExample();
  const cases: Array<[string, Record<string, unknown>]> = [
    ["unknown top-level key", { ...example, sitegate_mode: "fast" }],
    ["wrong type", { ...example, telemetry: { poll_interval_ms: "fast" } }],
    ["missing site_id", Object.fromEntries(Object.entries(example).filter(([k]) => k !== "site_id"))],
  ];
  for (const [what, cfg] of cases) assert.equal(validate(cfg), false, `${what} was accepted`);
});
