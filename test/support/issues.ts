// problems(fn): the details of the CONFIG_INVALID error fn throws (fails if fn accepts);
// refusal(p): the INVALID_REQUEST error a configure request is refused with (fails if accepted).
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

/** The INVALID_REQUEST error the configure request p is refused with (fails if it is accepted). */
export async function refusal(p: Promise<unknown>): Promise<SitegateError> {
  try {
    await p;
  } catch (e) {
    assert.ok(isSitegateError(e, "INVALID_REQUEST"), String(e));
    return e;
  }
  assert.fail("the configure request was accepted");
}
