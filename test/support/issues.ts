// problems(fn): the details of the CONFIG_INVALID error fn throws (fails if fn accepts).
import assert from "node:assert/strict";
import { isSitegateError, type SitegateError } from "../../src/errors.js";

export type Problem = { path: string; message: string };

export function problems(fn: () => unknown): Problem[] {
  try {
    fn();
  } catch (e) {
    assert.ok(isSitegateError(e, "CONFIG_INVALID"), `expected CONFIG_INVALID, got ${String(e)}`);
    return (e as SitegateError).details;
  }
  assert.fail("config was accepted");
}
