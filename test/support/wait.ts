/** Polls pred every 25 ms until it holds; fails with `what` after timeoutMs (a bound, not a measurement). */
export async function until(pred: () => boolean | Promise<boolean>, what: string, timeoutMs = 15000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await pred())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
