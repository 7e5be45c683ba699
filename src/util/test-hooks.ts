// Crash-injection points for the tests, all behind one switch: SITEGATE_TEST_HOOKS=1. Without
// it every point is a no-op and no other SITEGATE_TEST_* variable is read. With it, a process
// that reaches the point named by SITEGATE_TEST_HOOK_AT writes that name to
// SITEGATE_TEST_HOOK_FILE (stderr by default), then waits to be killed or, when
// SITEGATE_TEST_HOOK_RESUME names a FIFO, until the test writes to that FIFO.
// docs/testing.md lists the points.
import { readFileSync, writeFileSync } from "node:fs";

/** Stops here when the tests asked for `point`; `ready` holds the stop until the state to crash in exists. */
export async function testHook(point: string, ready: () => boolean = () => true): Promise<void> {
  const env = process.env;
  if (env.SITEGATE_TEST_HOOKS !== "1" || env.SITEGATE_TEST_HOOK_AT !== point) return;
  while (!ready()) await new Promise((r) => setTimeout(r, 10));
  writeFileSync(env.SITEGATE_TEST_HOOK_FILE ?? "/dev/stderr", point + "\n");
  const resume = env.SITEGATE_TEST_HOOK_RESUME;
  if (resume) {
    readFileSync(resume); // blocks until the test opens the FIFO for writing and closes it
    return;
  }
  await new Promise(() => setInterval(() => {}, 1 << 30));
}
