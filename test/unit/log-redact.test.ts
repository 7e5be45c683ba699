import { test } from "node:test";
import assert from "node:assert/strict";
import { Writable } from "node:stream";
import { createLogger } from "../../src/log.js";

test("secrets are redacted from log lines", () => {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, cb) {
      lines.push(String(chunk));
      cb();
    },
  });
  const log = createLogger({ level: "info", pretty: false, destination: sink });
  log.info(
    {
      auth: {
        users: [{ username: "partner", password_hash: "scrypt$1$2$3$c2FsdA==$aGFzaA==" }],
        api_keys: [{ name: "p", key_hash: "scrypt$9$9$9$eA==$eQ==" }],
      },
      partner: { headers: [{ name: "X-Partner-Key", value: "super-secret-header" }] },
      password: "hunter2",
      access_token: "tok-123",
    },
    "config",
  );
  const text = lines.join("");
  for (const secret of ["hunter2", "tok-123", "super-secret-header", "aGFzaA==", "eQ=="])
    assert.ok(!text.includes(secret), `${secret} leaked: ${text}`);
  assert.match(text, /\[redacted\]/);
  assert.match(text, /"username":"partner"/, "what is not secret stays");
});
