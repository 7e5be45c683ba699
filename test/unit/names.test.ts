// One name per thing (docs/architecture.md "Words"): the code does not bring back the names
// the glossary retired. Wire names are not checked here: the CLI command `outbox`, the
// tables of earlier releases, the STATUS line and the status page's JSON keep theirs.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const SRC = resolve(fileURLToPath(import.meta.url), "../../../../src");

/** `file:line: text` of every line of src matching `re`. */
function hits(re: RegExp, dir = SRC): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return hits(re, p);
    if (!e.name.endsWith(".ts")) return [];
    return readFileSync(p, "utf8")
      .split("\n")
      .flatMap((line, i) => (re.test(line) ? [`${relative(SRC, p)}:${i + 1}: ${line.trim()}`] : []));
  });
}

test("the outbound queue is the delivery log: no identifier calls it outbox or messages", () => {
  assert.deepEqual(hits(/\boutbox[A-Z]\w*|\w+Outbox\b|\bOUTBOX_\w*|\bmessages\??:\s*DeliveryLog\b/), []);
});

test("restore is the event kind only: a device reverts its pre-state and is handed back, never restore()d or release()d", () => {
  assert.deepEqual(hits(/\b(restore|release)\??\((pre\b|\)\s*:\s*Promise)|\.(restore|release)\?\.\(|\bd\.restore\(/), []);
});

test("a local device has one name: LocalDevice (DeclaredDevice is only the config's id-check record)", () => {
  assert.deepEqual(hits(/class DeclaredDevice\b|extends DeclaredDevice\b|type LocalDevice\s*=/), []);
});
