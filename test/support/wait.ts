/**
 * Polls pred every 25 ms until it holds; fails with `what` after timeoutMs. The ceiling only
 * turns a hang into a failure: it is generous (60 s unless a test gives more), so that a
 * machine under load is slower, never red (docs/testing.md).
 */
export async function until(pred: () => boolean | Promise<boolean>, what: string, timeoutMs = 60_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await pred())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25)); // wait: the polling interval of the condition
  }
}
