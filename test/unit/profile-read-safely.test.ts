// The YAML limits of a profile read from disk (src/profiles/read-safely.ts): flow nesting
// counted by the YAML lexer before anything is parsed (brackets in quoted, plain or block
// text and in comments do not count), depth after, aliases; errors name a place, never
// the text.
import { test } from "node:test";
import assert from "node:assert/strict";
import { PROFILE_MAX_DEPTH, parseProfileYaml } from "../../src/profiles/read-safely.js";
import { isSitegateError } from "../../src/errors.js";

const refused = (re: RegExp) => (e: unknown) => isSitegateError(e, "PROFILE_INVALID") && re.test((e as Error).message);

test("brackets in quoted, plain and block text and in comments are text, not nesting", () => {
  const b = "[".repeat(PROFILE_MAX_DEPTH + 8);
  assert.deepEqual(parseProfileYaml(`a: "${b}"\n# ${b}\nb: '${b}'\nc: x${b}\nd: |\n  ${b}\n`), { a: b, b, c: `x${b}`, d: `${b}\n` });
});

test("flow nesting over the limit is refused at its line and column before parsing; at the limit it parses", () => {
  const nest = (n: number) => `${"[".repeat(n)}1${"]".repeat(n)}`;
  assert.doesNotThrow(() => parseProfileYaml(`k: ${nest(PROFILE_MAX_DEPTH - 1)}\n`));
  assert.throws(
    () => parseProfileYaml(`name: x\nk: ${nest(PROFILE_MAX_DEPTH + 1)}\n`),
    refused(/nests deeper than 32 levels at line 2, column 36$/),
  );
});

test("block nesting over the limit is refused by its key path; aliases are limited; YAML errors name a place, not the text", () => {
  let deep = "";
  for (let i = 0; i < PROFILE_MAX_DEPTH + 2; i++) deep += `${" ".repeat(i)}k${i}:\n`;
  assert.throws(
    () => parseProfileYaml(`${deep}${" ".repeat(PROFILE_MAX_DEPTH + 2)}v\n`),
    refused(/nests deeper than 32 levels at \.k0\.k1\./),
  );
  const laughs = ["a: &a [x, x, x, x, x, x, x, x, x]"];
  for (const [i, n] of ["b", "c", "d", "e", "f", "g"].entries())
    laughs.push(`${n}: &${n} [${Array(9).fill(`*${"abcdef"[i]}`).join(", ")}]`);
  assert.throws(() => parseProfileYaml(laughs.join("\n")), refused(/aliases are limited to 64/));
  assert.throws(
    () => parseProfileYaml(`name: x\nsecret: "hunter2\n`),
    (e: unknown) => refused(/is not valid YAML: [A-Z_]+ at line \d+, column \d+$/)(e) && !(e as Error).message.includes("hunter2"),
  );
  assert.throws(() => parseProfileYaml(`a: 1\na: 2\n`), refused(/DUPLICATE_KEY at line 2, column 1/));
});
